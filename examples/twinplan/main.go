// Command twinplan is the multi-agent "twin trainer" of RLlib Flow (Liang et
// al. 2021, Figure 6 / Listing 4) as a herd dataflow plan: two policies,
// trained by two different algorithms, learn together in one multi-agent
// env. In MPE simple_tag, PPO trains the "adversary" policy (the three
// chasers) and A2C the "good" policy (the runner):
//
//	rollouts := Flatten(Flatten(GatherSync(ParallelRollouts(workers))))  // one batch per policy per worker
//	copies := Split(rollouts, 2, bound)
//	adv := ForEach(Select(copies[0], policyOf, "adversary"), TrainOneStep(ppo))
//	good := ForEach(Select(copies[1], policyOf, "good"), TrainOneStep(a2c))
//	return StandardMetricsReporting(UnionRoundRobin(adv, good))
//
// Each worker steps its envs' agent rows (env.FlatVector) cut by policy
// (env.SplitVector): the two policies' segment workers act in lockstep on
// their own rows, and each yields a batch tagged with its policy id. The
// paper pairs PPO with DQN; here the second algorithm is A2C, because
// both halves then use the on-policy segment pieces that flow's rollout
// workers share, and DQN's replay half is a separate plan (algo/dqn's).
// The plan is synchronous (GatherSync, round-robin Union), so a seed gives
// the same result every time.
//
//	go run ./examples/twinplan -steps 400000
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"herd/algo"
	"herd/algo/a2c"
	"herd/algo/ppo"
	"herd/env"
	"herd/flow"
	"herd/internal/rng"
	"herd/rollout"
	"herd/sample"
	"herd/weights"
)

const envID = "mpe/simple_tag_v3?agent_id=true"

func main() {
	steps := flag.Int64("steps", 400_000, "environment steps (agent rows)")
	seed := flag.Uint64("seed", 1, "run seed")
	workers := flag.Int("workers", 2, "rollout workers")
	flag.Parse()
	if _, err := run(context.Background(), os.Stdout, *seed, *steps, *workers); err != nil {
		fmt.Fprintln(os.Stderr, "twinplan:", err)
		os.Exit(1)
	}
}

// twin is the plan's config: PPO for the adversaries, A2C for the good
// agent, envsPerWorker envs of 4 agents on each of workers workers.
type twin struct {
	ppo           ppo.Config
	a2c           a2c.Config
	workers       int
	envsPerWorker int
	numSteps      int
	learners      []algo.SegmentLearner // closed by run
	ws            []*worker             // closed by run
}

// policy is one of the two policies: its id, the agents it acts for
// (simple_tag's PossibleAgents order: adversary_0..2, agent_0) and its
// pieces.
type policy struct {
	id     string
	agents []int
	pieces *algo.Pieces
	gamma  float32
}

// batch is one policy's segment from one worker.
type batch struct {
	policy string
	seg    *sample.Segment
}

func policyOf(b batch) string { return b.policy }

// Plan is the twin trainer.
func (c *twin) Plan(r *flow.Run) (flow.Iter[flow.Report], error) {
	pols, err := c.policies(r)
	if err != nil {
		return nil, err
	}
	ws, err := newWorkers(r, c, pols)
	if err != nil {
		return nil, err
	}
	rollouts := flow.Flatten(flow.Flatten(flow.GatherSync(rolloutShards(r, ws)))) // round → worker → policy
	copies := flow.Split(rollouts, 2, 2*len(ws)+2)
	adv := flow.ForEach(flow.Select(copies[0], policyOf, "adversary"), trainOneStep(r, ws, 0, c.learners[0]))
	good := flow.ForEach(flow.Select(copies[1], policyOf, "good"), trainOneStep(r, ws, 1, c.learners[1]))
	return flow.StandardMetricsReporting(r, flow.UnionRoundRobin(adv, good)), nil
}

// policies builds each policy's pieces and learner, with its own seed
// (run seed + k) and its share of the steps, so that PPO's learning-rate
// annealing spans the run.
func (c *twin) policies(r *flow.Run) ([]*policy, error) {
	rounds := r.Header.Steps / int64(c.workers*c.envsPerWorker*4*c.numSteps)
	pols := []*policy{{id: "adversary", agents: []int{0, 1, 2}, gamma: c.ppo.Gamma}, {id: "good", agents: []int{3}, gamma: c.a2c.Gamma}}
	for k, p := range pols {
		h := r.Header
		h.Seed += uint64(k)
		h.Steps = rounds * int64(c.workers*c.envsPerWorker*len(p.agents)*c.numSteps)
		var err error
		if k == 0 {
			c.ppo.NumEnvs, c.ppo.NumSteps = c.envsPerWorker*len(p.agents), c.numSteps
			p.pieces, err = ppo.Spec().Pieces(h, &c.ppo, r.Spaces)
		} else {
			c.a2c.NumEnvs, c.a2c.NumSteps = c.envsPerWorker*len(p.agents), c.numSteps
			p.pieces, err = a2c.Spec().Pieces(h, &c.a2c, r.Spaces)
		}
		if err != nil {
			return nil, fmt.Errorf("policy %s: %w", p.id, err)
		}
		l, err := p.pieces.NewSegmentLearner()
		if err != nil {
			return nil, fmt.Errorf("policy %s: %w", p.id, err)
		}
		c.learners = append(c.learners, l)
	}
	return pols, nil
}

// worker steps envsPerWorker simple_tag envs; each policy acts on its own
// agents' rows with its own policy copy and segment worker.
type worker struct {
	actor  *flow.Actor
	parts  []env.Vector
	nets   []algo.PolicyNet
	sws    []*rollout.Segments
	pols   []*policy
	T      int
	rounds int64
	err    error // a failed weight update, reported by the next batch
}

func newWorkers(r *flow.Run, c *twin, pols []*policy) ([]*worker, error) {
	rounds := r.Header.Steps / int64(c.workers*c.envsPerWorker*4*c.numSteps)
	if rounds < 1 {
		return nil, fmt.Errorf("steps %d is less than one round (%d workers × %d envs × 4 agents × %d steps)", r.Header.Steps, c.workers, c.envsPerWorker, c.numSteps)
	}
	var ws []*worker
	for i := range c.workers {
		v, err := env.MakeVector(envID, c.envsPerWorker*4, env.Sync, env.WithEpisodeStatistics())
		if err != nil {
			return nil, err
		}
		rows := make([][]int, len(pols))
		for e := range c.envsPerWorker {
			for k, p := range pols {
				for _, j := range p.agents {
					rows[k] = append(rows[k], e*4+j)
				}
			}
		}
		parts, err := env.SplitVector(v, rows, nil)
		if err != nil {
			v.Close()
			return nil, err
		}
		w := &worker{actor: flow.NewActor(), parts: parts, pols: pols, T: c.numSteps, rounds: rounds}
		ws = append(ws, w)
		c.ws = append(c.ws, w)
		for k, p := range pols {
			net, err := p.pieces.NewPolicy()
			if err != nil {
				return nil, err
			}
			s, err := p.pieces.NewSampler(len(rows[k]), rng.New(r.Header.Seed, "twin/"+p.id, i))
			if err != nil {
				return nil, err
			}
			w.nets = append(w.nets, net)
			w.sws = append(w.sws, rollout.NewSegments(i, parts[k], rollout.NewInline(net, s), p.gamma))
		}
		if err := w.both(func(k int) error { return w.sws[k].Reset(int64(rng.Derive(r.Header.Seed, "twin/env", i) >> 1)) }); err != nil {
			return nil, err
		}
	}
	return ws, nil
}

// both runs f for each policy on a goroutine of its own (the policies'
// parts step in lockstep); a policy that fails closes its part, so the
// other stops too.
func (w *worker) both(f func(k int) error) error {
	errs := make([]error, len(w.pols))
	var wg sync.WaitGroup
	for k := range w.pols {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if errs[k] = f(k); errs[k] != nil {
				w.parts[k].Close()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// next is a worker's item: one segment per policy, T steps of its rows.
func (w *worker) next() ([]batch, error) {
	if w.err != nil {
		return nil, w.err
	}
	if w.rounds == 0 {
		return nil, flow.ErrEnd
	}
	w.rounds--
	out := make([]batch, len(w.pols))
	err := w.both(func(k int) error {
		seg := sample.NewSegment(w.T, w.parts[k].NumEnvs(), w.parts[k].ObservationSpace().Dim(), w.parts[k].ActionSpace().Dim())
		out[k] = batch{policy: w.pols[k].id, seg: seg}
		return w.sws[k].Collect(seg)
	})
	return out, err
}

func rolloutShards(r *flow.Run, ws []*worker) flow.ParIter[[]batch] {
	shards := make([]flow.Shard[[]batch], len(ws))
	for i, w := range ws {
		shards[i] = flow.Shard[[]batch]{Actor: w.actor, Next: w.next}
	}
	return flow.NewParIter(r.Ctx, shards)
}

// trainOneStep learns policy k's batch and sends its new weights to every
// worker (seen before the next round, as GatherSync promises); the
// report's scalars are named policy/<id>/<name>.
func trainOneStep(r *flow.Run, ws []*worker, k int, l algo.SegmentLearner) func(batch) (flow.Report, error) {
	return func(b batch) (flow.Report, error) {
		stats, err := l.Learn(r.Ctx, b.seg)
		if err != nil {
			return flow.Report{}, err
		}
		v := l.Weights()
		for _, w := range ws {
			w.actor.Send(func() { w.setWeights(k, v) })
		}
		for i := range stats {
			stats[i].Name = "policy/" + b.policy + "/" + stats[i].Name
		}
		rep := flow.Report{Steps: int64(b.seg.T * b.seg.N), Stats: stats}
		for _, e := range b.seg.Episodes {
			rep.Stats = append(rep.Stats, algo.Stat{Name: "policy/" + b.policy + "/episodic_return", Value: e.Return})
			e.At = (e.At + 1) * b.seg.N
			rep.Episodes = append(rep.Episodes, e)
		}
		return rep, nil
	}
}

func (w *worker) setWeights(k int, v *weights.Version) {
	if err := w.nets[k].SetWeights(v); err != nil && w.err == nil {
		w.err = err
	}
}

// run trains and returns each policy's mean episode return over its last
// 100 episodes (per agent).
func run(ctx context.Context, out io.Writer, seed uint64, steps int64, workers int) (map[string]float64, error) {
	h := algo.DefaultHeader()
	h.Algo, h.Env, h.Seed, h.Steps = "ppo", envID, seed, steps
	h.Runtime.Executor = "flow"
	h.EnsureDefaults()
	c := &twin{ppo: ppo.DefaultConfig(), a2c: a2c.DefaultConfig(), workers: workers, envsPerWorker: 8, numSteps: 25}
	c.ppo.LearningRate, c.ppo.UpdateEpochs, c.ppo.NumMinibatches, c.ppo.Hidden = 7e-4, 4, 2, []int{64, 64}
	c.a2c.LearningRate, c.a2c.Hidden = 7e-4, []int{64, 64}
	defer func() {
		for _, w := range c.ws {
			w.actor.Close()
			for _, p := range w.parts {
				p.Close()
			}
		}
		for _, l := range c.learners {
			l.Close()
		}
	}()
	log := &returns{w: out, last: map[string][]float64{}}
	if _, err := flow.TrainPlan(ctx, &algo.Runtime{Header: h, Log: log}, ppo.Spec(), &c.ppo, c); err != nil {
		return nil, err
	}
	means := map[string]float64{}
	for _, id := range []string{"adversary", "good"} {
		xs := log.last[id]
		for _, x := range xs {
			means[id] += x / float64(len(xs))
		}
		fmt.Fprintf(out, "%s: %d episodes, return (last %d) %.2f\n", id, log.n[id], len(xs), means[id])
	}
	fmt.Fprintf(out, "%d steps\n", log.step)
	return means, nil
}

// returns keeps each policy's last 100 episode returns and prints a line
// every 20 000 steps.
type returns struct {
	w      io.Writer
	step   int64
	last   map[string][]float64
	n      map[string]int
	report int64
}

func (l *returns) Episode(int64, float64, int) {}
func (l *returns) Step(s int64) {
	l.step = s
	if s >= l.report+20_000 {
		l.report = s
		fmt.Fprintf(l.w, "step %7d: adversary %.2f, good %.2f\n", s, mean(l.last["adversary"]), mean(l.last["good"]))
	}
}
func (l *returns) Scalar(name string, v float64) {
	id, ok := strings.CutSuffix(strings.TrimPrefix(name, "policy/"), "/episodic_return")
	if !ok {
		return
	}
	if l.n == nil {
		l.n = map[string]int{}
	}
	l.n[id]++
	xs := append(l.last[id], v)
	if len(xs) > 100 {
		xs = xs[1:]
	}
	l.last[id] = xs
}

func mean(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x / float64(len(xs))
	}
	return s
}
