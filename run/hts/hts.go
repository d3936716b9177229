package hts

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"herd/algo"
	"herd/env"
	"herd/internal/rng"
	"herd/metrics"
	"herd/sample"
	"herd/weights"
)

// ErrConfig marks an unusable HTS setup; it wraps algo.ErrConfig.
var ErrConfig = fmt.Errorf("%w: hts", algo.ErrConfig)

// Options are the executor's counts (the runtime: section).
type Options struct {
	// EnvWorkers is E, the number of env workers the envs are spread
	// over (contiguous blocks). Default: one per env.
	EnvWorkers int
	// PolicyWorkers is P, the number of policy workers serving inference
	// requests. Default 1.
	PolicyWorkers int
	// Alpha is α, the steps each env takes between two batch
	// synchronizations; it is the segment length T and replaces the
	// algorithm's num_steps when set. Default: num_steps.
	Alpha int
	// StepTime, if set, makes every env step take a drawn duration
	// (env.WithStepTime); results do not change.
	StepTime *env.StepTime
	// Sync turns HTS off, for comparison: every step waits for the
	// slowest env (a barrier per step), and the learner runs between
	// segments with no lag, as synchronous A2C/PPO do.
	Sync bool
	// Timing, if not nil, receives where the wall clock went.
	Timing *Timing
}

// Timing is where an HTS run's wall clock went.
type Timing struct {
	// Collect is the time env workers spent gathering segments (from the
	// start of a segment to its barrier), over Segments segments of
	// StepsPerEnv steps each.
	Collect     time.Duration
	Segments    int
	StepsPerEnv int
	// LearnWait is the time the barrier waited for the learner after
	// collection was done (0 when learning hides behind collection).
	LearnWait time.Duration
}

// OptionsOf reads the executor's options from a run header.
func OptionsOf(h algo.Header) Options {
	rc := h.Runtime
	return Options{EnvWorkers: rc.EnvWorkers, PolicyWorkers: rc.PolicyWorkers, Alpha: rc.Alpha, StepTime: rc.StepTime}
}

// Train runs spec's pieces under HTS for rt.Header.Steps env steps and
// returns the final model. Results are bit-identical for any numbers of env
// workers and policy workers, any GOMAXPROCS and any step times: see the
// package doc for why. A run with a multiagent section trains one policy
// per id, each from its own agents' rows (see "Several policies").
func Train(ctx context.Context, rt *algo.Runtime, spec algo.Spec, cfg algo.Config, opt Options) (algo.Model, error) {
	h := rt.Header
	if err := algo.Admit(Executor(), h, spec, rt.Others); err != nil {
		return nil, err
	}
	shape, ok := cfg.(algo.Rollout)
	if !ok || spec.Pieces == nil {
		return nil, algo.Undeclared(spec, algo.CanSegmentLearner, "its config has no rollout shape or it has no pieces")
	}
	numEnvs, T, _ := shape.RolloutShape()
	if opt.Alpha > 0 && opt.Alpha != T {
		// The learner plans its learning-rate schedule and batch shapes
		// on num_steps, so α is num_steps, written once.
		return nil, fmt.Errorf("%w: alpha %d differs from the algorithm's num_steps %d: α is the segment length; set num_steps", ErrConfig, opt.Alpha, T)
	}
	defaultE := opt.EnvWorkers == 0
	if defaultE {
		opt.EnvWorkers = numEnvs
	}
	if opt.PolicyWorkers == 0 {
		opt.PolicyWorkers = 1
	}
	if opt.EnvWorkers < 1 || opt.EnvWorkers > numEnvs || opt.PolicyWorkers < 1 || T < 1 {
		return nil, fmt.Errorf("%w: env_workers %d (1…num_envs %d), policy_workers %d (≥ 1), alpha %d (≥ 1)",
			ErrConfig, opt.EnvWorkers, numEnvs, opt.PolicyWorkers, T)
	}
	iters := int(h.Steps / int64(numEnvs*T))
	if iters < 1 {
		return nil, fmt.Errorf("%w: steps %d is less than one segment (%d envs × alpha %d)", ErrConfig, h.Steps, numEnvs, T)
	}

	// Envs, one per slot i, each with its own seed and its own sampler
	// stream ("env-worker", i): slots, not workers, own the randomness, so
	// spreading the envs over more or fewer workers changes nothing. A
	// multi-agent env's slot is one env of A agent rows (a FlatVector of
	// one env, as the local executor's rows): the slot steps when all A
	// rows have their actions, and each row has its own sampler stream
	// ("env-worker", row).
	agentsPerSlot := 1
	var agents []string
	if h.Envs.IsParallel(h.Env) {
		pe, err := h.Envs.MakeParallel(h.Env)
		if err != nil {
			return nil, err
		}
		agents = slices.Clone(pe.PossibleAgents())
		agentsPerSlot = len(agents)
		pe.Close()
		if numEnvs%agentsPerSlot != 0 {
			return nil, fmt.Errorf("%w: num_envs %d counts agent rows; %s has %d agents per env", ErrConfig, numEnvs, h.Env, agentsPerSlot)
		}
		if opt.StepTime != nil {
			return nil, fmt.Errorf("%w: step_time is not available for a multi-agent env (%s)", ErrConfig, h.Env)
		}
	}
	slots := numEnvs / agentsPerSlot
	if defaultE {
		opt.EnvWorkers = slots
	}
	if opt.EnvWorkers > slots {
		return nil, fmt.Errorf("%w: env_workers %d > %d envs (%d rows of %d agents)", ErrConfig, opt.EnvWorkers, slots, numEnvs, agentsPerSlot)
	}
	mkOpts := []env.Option{env.WithEpisodeStatistics()}
	if opt.StepTime != nil {
		mkOpts = append(mkOpts, env.WithStepTime(*opt.StepTime))
	}
	var envs []env.Env
	var groups []env.Vector
	defer func() {
		for _, e := range envs {
			if e != nil {
				e.Close()
			}
		}
		for _, g := range groups {
			if g != nil {
				g.Close()
			}
		}
	}()
	var spaces algo.Spaces
	of := make([]int, agentsPerSlot) // policy of each agent of a slot
	var policyActs []env.Space       // each policy's action space, with a multiagent section
	if agents != nil && h.MultiAgent.Enabled() {
		var err error
		if _, of, policyActs, err = h.MultiAgent.PolicyAgents(h.Envs, h.Env); err != nil {
			return nil, err
		}
		// Each policy acts with a network of its own agents' action
		// space.
		mkOpts = append(mkOpts, env.WithAgentActionSpaces())
	}
	if agents != nil {
		groups = make([]env.Vector, slots)
		for i := range groups {
			g, err := h.Envs.MakeVector(h.Env, agentsPerSlot, env.Sync, mkOpts...)
			if err != nil {
				return nil, err
			}
			groups[i] = g
		}
		spaces = algo.SpacesOf(groups[0])
	} else {
		envs = make([]env.Env, numEnvs)
		for i := range envs {
			e, err := h.Envs.Make(h.Env, mkOpts...)
			if err != nil {
				return nil, err
			}
			envs[i] = e
		}
		spaces = algo.SpacesOf(envs[0])
	}

	// The policies: the run's one, or one per multiagent id, each with its
	// own pieces, learner, weights, samplers and segment storage.
	ids := []string{""}
	if ma := h.MultiAgent; ma.Enabled() {
		if agents == nil {
			return nil, fmt.Errorf("%w: multiagent needs a multi-agent env, not %s", ErrConfig, h.Env)
		}
		ids = ma.Policies
	}
	// Checkpoints (algo.Checkpoints) at barriers: see checkpointer.
	cks := rt.Checkpoints
	var cp *checkpointer
	pols := make([]*policy, len(ids))
	for k, id := range ids {
		p := &policy{}
		for _, pk := range of {
			if pk == k {
				p.perSlot++
			}
		}
		p.n = slots * p.perSlot
		hk, sk, ck := h, spec, cfg
		if id != "" {
			p.prefix = "policy/" + id + "/"
			var err error
			if hk, sk, ck, err = algo.PolicyRun(h, spec, cfg, rt.Others, k, p.perSlot, agentsPerSlot); err != nil {
				return nil, err
			}
			// Policy k's budget is its rows' share of whole segments.
			hk.Steps = int64(iters * T * p.n)
			sh, ok := ck.(algo.Rollout)
			if !ok || sk.Pieces == nil {
				return nil, algo.Undeclared(sk, algo.CanSegmentLearner, "its config has no rollout shape or it has no pieces")
			}
			if _, tk, _ := sh.RolloutShape(); tk != T {
				return nil, fmt.Errorf("%w: policy %s: %s.num_steps %d differs from %s.num_steps %d: every policy's segment is α steps", ErrConfig, id, sk.Name, tk, spec.Name, T)
			}
			if err := ck.Validate(hk); err != nil {
				return nil, fmt.Errorf("hts: policy %s: %w", id, err)
			}
		}
		_, _, p.gamma = ck.(algo.Rollout).RolloutShape()
		sp := spaces
		if policyActs != nil {
			sp.Act = policyActs[k]
		}
		p.actDim = sp.Act.Dim()
		pieces, err := sk.Pieces(hk, ck, sp)
		if err != nil {
			return nil, err
		}
		if pieces.NewSegmentLearner == nil {
			return nil, algo.Undeclared(sk, algo.CanSegmentLearner, "its pieces have no segment learner")
		}
		if p.learner, err = pieces.NewSegmentLearner(); err != nil {
			return nil, err
		}
		defer p.learner.Close()
		if p.mod, ok = p.learner.(algo.Modeler); !ok {
			return nil, algo.Undeclared(sk, algo.CanSegmentLearner, "its learner cannot hand out its model (algo.Modeler)")
		}
		p.samplers, p.srcs = make([]algo.Sampler, p.n), make([]*rand.PCG, p.n)
		for i := range p.samplers {
			p.srcs[i] = rng.Source(hk.Seed, "env-worker", i) // kept: a checkpoint saves its state
			if p.samplers[i], err = pieces.NewSampler(1, rand.New(p.srcs[i])); err != nil {
				return nil, err
			}
		}
		if cks != nil {
			if err := saveable(p.learner, envs, ids[0] != "", groups != nil, opt.Sync); err != nil {
				if cks.Restored() != nil {
					return nil, fmt.Errorf("hts: cannot resume: %w", err)
				}
				cks.Disable(err.Error())
				cks = nil
			} else {
				cp = &checkpointer{learner: p.learner.(algo.LearnerCheckpoint), envs: envs, samplers: p.srcs}
				if s := cks.Restored(); s != nil {
					// Before the policy workers start: they read the
					// store from their first request on.
					if err := cp.learner.RestoreLearner(s); err != nil {
						return nil, fmt.Errorf("hts: resume from step %d: %w", s.Header.Step, err)
					}
				}
			}
		}
		p.pieces, p.store = pieces, weights.NewStore(p.learner.Weights())
		p.learnDone = make(chan learned, 1)
		pols[k] = p
	}
	model := func() algo.Model {
		if ids[0] == "" {
			return pols[0].mod.Model()
		}
		ps := &algo.Policies{IDs: ids, Agents: agents, Of: of}
		for _, p := range pols {
			ps.Models = append(ps.Models, p.mod.Model())
		}
		return ps
	}
	rt.Track(model()) // divergence guard (algo.TrainRun)
	// actDim is a slot's row width: the widest agent's action.
	obsDim, actDim := spaces.Obs.Dim(), spaces.Act.Dim()

	// With checkpoints, a stop (ctx) is taken at the next barrier, where
	// the run's state is whole: the segment under way and the update in
	// flight finish first (runCtx).
	stopped := ctx
	if cks != nil {
		ctx = context.WithoutCancel(ctx)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	inf := newInference(2 * numEnvs) // every env's step request plus a bootstrap request each
	var pwg sync.WaitGroup
	for range opt.PolicyWorkers {
		nets := make([]algo.PolicyNet, len(pols))
		for k, p := range pols {
			net, err := p.pieces.NewPolicy()
			if err != nil {
				cancel()
				pwg.Wait()
				return nil, err
			}
			nets[k], p.outDim = net, net.OutDim()
		}
		pwg.Add(1)
		go func() { defer pwg.Done(); inf.serve(ctx, nets, pols, obsDim) }()
	}
	stop := func() { cancel(); pwg.Wait() }

	workers := spread(slots, opt.EnvWorkers)
	ews := make([]*envWorker, len(workers))
	for w, sl := range workers {
		ew := &envWorker{slot0: sl[0], agents: agentsPerSlot, of: of, rank: make([]int, agentsPerSlot),
			obsDim: obsDim, actDim: actDim, T: T, inf: inf, pols: make([]workerPolicy, len(pols))}
		seen := make([]int, len(pols))
		for a, k := range of {
			ew.rank[a], seen[k] = seen[k], seen[k]+1
		}
		for k, p := range pols {
			lo, hi := sl[0]*p.perSlot, sl[1]*p.perSlot // policy k's rows
			ew.pols[k] = workerPolicy{lo: lo, hi: hi, n: p.n, perSlot: p.perSlot, outDim: p.outDim, actDim: p.actDim, gamma: p.gamma, samplers: p.samplers[lo:hi]}
		}
		if groups != nil {
			ew.groups = groups[sl[0]:sl[1]]
		} else {
			ew.envs = envs[sl[0]:sl[1]]
		}
		if err := ew.reset(h.Seed); err != nil {
			stop()
			return nil, err
		}
		ews[w] = ew
	}

	// Two storages per policy: env workers fill segs[k%2] while the
	// learners read segs[(k-1)%2].
	for _, p := range pols {
		p.segs = [2]*sample.Segment{sample.NewSegment(T, p.n, obsDim, p.actDim), sample.NewSegment(T, p.n, obsDim, p.actDim)}
	}
	learning := false
	// finish collects every learner's update, in policy order.
	finish := func() ([]learned, bool) {
		if !learning {
			return nil, false
		}
		learning = false
		out := make([]learned, len(pols))
		for k, p := range pols {
			out[k] = <-p.learnDone
		}
		return out, true
	}
	// publish logs the updates' stats and publishes their weights.
	publish := func(res []learned) error {
		var errs []error
		for k, r := range res {
			if r.err == nil {
				for _, s := range r.stats {
					rt.Log.Scalar(pols[k].prefix+s.Name, s.Value)
				}
				r.err = pols[k].store.Publish(r.next)
			}
			errs = append(errs, r.err)
		}
		return errors.Join(errs...)
	}
	// fail stops every goroutine, the learners included, before the model
	// is handed out.
	fail := func(err error) (algo.Model, error) {
		stop()
		finish()
		return model(), err
	}
	var globalStep int64
	segs := make([]*sample.Segment, len(pols))
	first := 0
	if cp != nil {
		cp.ews = ews
		if s := cks.Restored(); s != nil {
			k, step, seg, err := cp.restore(s, pols[0].segs[0])
			if err != nil {
				stop()
				return nil, fmt.Errorf("hts: resume from step %d: %w", s.Header.Step, err)
			}
			if k >= iters {
				stop()
				return nil, fmt.Errorf("hts: resume from step %d: the checkpoint ends segment %d, past the run's %d segments", s.Header.Step, k, iters)
			}
			// The barrier that ended segment k, from its last part on:
			// the learner starts on segment k.
			pols[0].segs[k%2], globalStep, first = seg, step, k+1
			learning = true
			go pols[0].learn(ctx, seg)
		}
	}
	save := func(k int) error {
		sections, err := cp.save(k, globalStep, pols[0].segs[k%2])
		if err == nil {
			err = cks.Save(globalStep, sections)
		}
		if err != nil {
			return fmt.Errorf("hts: checkpoint at step %d not saved: %w", globalStep, err)
		}
		return nil
	}
	for it := first; it < iters; it++ {
		for k, p := range pols {
			segs[k] = p.segs[it%2]
			segs[k].Version = p.store.Latest().N
		}
		t0 := time.Now()
		episodes, err := collect(ctx, ews, segs, int64(it*T), opt.Sync)
		t1 := time.Now()
		// Barrier: every env worker has finished its α steps. Collect the
		// learners' updates of the previous segment, publish them, and
		// hand them this segment.
		res, ok := finish()
		if tm := opt.Timing; tm != nil {
			tm.Collect += t1.Sub(t0)
			tm.LearnWait += time.Since(t1)
			tm.Segments++
			tm.StepsPerEnv = T
		}
		if ok {
			if perr := publish(res); err == nil {
				err = perr
			}
		}
		if err != nil {
			return fail(err)
		}
		for _, e := range episodes {
			rt.Log.Episode(globalStep+int64((e.At+1)*numEnvs), e.Return, e.Length)
		}
		if ids[0] != "" {
			for k, p := range pols {
				p.logEpisodes(rt.Log, episodes, k)
			}
		}
		globalStep += int64(T * numEnvs)
		learning = true
		if opt.Sync {
			// No overlap and no lag: the next segment is collected with
			// the weights learned from this one.
			for k, p := range pols {
				p.learn(ctx, segs[k])
			}
			res, _ := finish()
			if err := publish(res); err != nil {
				return fail(err)
			}
			rt.Log.Step(globalStep)
		} else {
			// The row (and the divergence guard's look at the parameters)
			// comes before the learners start writing them again.
			rt.Log.Step(globalStep)
			if cp != nil {
				// A diverged run (the guard's cancel) keeps no checkpoint
				// of its non-finite parameters. A failed write is the
				// caller's to report (Checkpoints.Err) when stopped.
				// No learner runs here (learning only marks segment it
				// as handed over next), so stopping waits for none.
				learning = false
				if err := stopped.Err(); err != nil {
					if !errors.Is(context.Cause(stopped), algo.ErrDiverged) {
						if serr := save(it); serr != nil && cks.Err() == nil {
							return fail(serr)
						}
					}
					return fail(err)
				}
				// The last barrier's checkpoint is the run's end: resumed,
				// it learns the last segment again.
				if cks.Due(globalStep) || it == iters-1 {
					if err := save(it); err != nil {
						return fail(err)
					}
				}
				learning = true
			}
			for k, p := range pols {
				go p.learn(ctx, segs[k])
			}
		}
	}
	res, _ := finish()
	stop()
	if err := publish(res); err != nil {
		return model(), err
	}
	rt.Log.Step(globalStep)
	return model(), nil
}

// learned is a learner's update of one segment.
type learned struct {
	stats []algo.Stat
	next  *weights.Version
	err   error
}

// policy is one policy's share of the run: the run's only one, or one id
// of a multiagent section, which acts for perSlot agents of every slot
// (n rows in all) and learns from their rows only.
type policy struct {
	prefix     string // "policy/<id>/", "" for the run's only policy
	perSlot, n int
	gamma      float32
	outDim     int
	actDim     int // its agents' action space's
	pieces     *algo.Pieces
	learner    algo.SegmentLearner
	mod        algo.Modeler
	store      *weights.Store
	samplers   []algo.Sampler // one per row: ("env-worker", row) from the policy's seed
	srcs       []*rand.PCG    // the samplers' streams
	segs       [2]*sample.Segment
	learnDone  chan learned
	rets, lens []float64 // its agents' last metrics.Window episodes
	episodes   int64
}

func (p *policy) learn(ctx context.Context, seg *sample.Segment) {
	stats, err := p.learner.Learn(ctx, seg)
	p.learnDone <- learned{stats: stats, next: p.learner.Weights(), err: err}
}

// logEpisodes logs the policy's columns (algo.PolicyScalars) when some of
// its agents' episodes ended in the segment.
func (p *policy) logEpisodes(log algo.Logger, eps []episode, k int) {
	ended := false
	for _, e := range eps {
		if e.policy != k {
			continue
		}
		if len(p.rets) == metrics.Window {
			p.rets, p.lens = p.rets[1:], p.lens[1:]
		}
		p.rets, p.lens = append(p.rets, e.Return), append(p.lens, float64(e.Length))
		p.episodes++
		ended = true
	}
	if ended {
		log.Scalar(p.prefix+"return_mean", mean(p.rets))
		log.Scalar(p.prefix+"length_mean", mean(p.lens))
		log.Scalar(p.prefix+"episodes", float64(p.episodes))
	}
}

func mean(xs []float64) float64 {
	s := 0.0
	for _, v := range xs {
		s += v
	}
	return s / float64(len(xs))
}

// episode is an ended episode of one row, and the policy that acted.
type episode struct {
	sample.Episode
	policy int
}

// spread splits n envs into w contiguous blocks [lo, hi).
func spread(n, w int) [][2]int {
	out := make([][2]int, w)
	for k := range w {
		out[k] = [2]int{k * n / w, (k + 1) * n / w}
	}
	return out
}

// collect runs every env worker for one segment (segs: one per policy)
// and returns their episodes in (step, row) order.
func collect(ctx context.Context, ews []*envWorker, segs []*sample.Segment, t0 int64, lockstep bool) ([]episode, error) {
	all := func(f func(w *envWorker) error) error {
		errs := make([]error, len(ews))
		var wg sync.WaitGroup
		for k, w := range ews {
			wg.Add(1)
			go func() { defer wg.Done(); errs[k] = f(w) }()
		}
		wg.Wait()
		return joinStopped(errs)
	}
	var err error
	if lockstep {
		// The synchronous baseline: every step waits for the slowest env.
		for _, w := range ews {
			w.episodes = w.episodes[:0]
		}
		for t := 0; t < ews[0].T && err == nil; t++ {
			err = all(func(w *envWorker) error { return w.step(ctx, segs, t, t0) })
		}
		if err == nil {
			err = all(func(w *envWorker) error { return w.end(ctx, segs) })
		}
	} else {
		err = all(func(w *envWorker) error { return w.collect(ctx, segs, t0) })
	}
	if err != nil {
		return nil, err
	}
	var eps []episode
	for _, w := range ews {
		eps = append(eps, w.episodes...)
	}
	// Workers are in env order, so a stable sort by step gives (step, row).
	slices.SortStableFunc(eps, func(a, b episode) int { return a.At - b.At })
	for k, seg := range segs {
		seg.Episodes = seg.Episodes[:0]
		for _, e := range eps {
			if e.policy == k {
				seg.Episodes = append(seg.Episodes, e.Episode)
			}
		}
	}
	return eps, nil
}

// envWorker steps the envs of slots [slot0, slot0+len) for α steps per
// segment, asking the policy workers for every policy's outputs and
// sampling with each row's own sampler.
type envWorker struct {
	T, obsDim, actDim int
	envs              []env.Env
	groups            []env.Vector // multi-agent: one env of agents rows per slot, in place of envs
	agents, slot0     int          // rows per slot; the worker's first slot
	of, rank          []int        // per agent of a slot: its policy, its index among that policy's agents
	pols              []workerPolicy
	groupActs         []float32
	inf               *inference
	episodes          []episode
}

// workerPolicy is an env worker's share of one policy: the policy's rows
// [lo, hi) of its n.
type workerPolicy struct {
	lo, hi, n int
	perSlot   int // the policy's agents per slot
	outDim    int
	actDim    int
	gamma     float32
	samplers  []algo.Sampler
	obs       []float32 // (hi−lo) × obsDim: what each row acts on next
	acts      []algo.Acts
	out       []float32 // the last step's outputs
	req, boot *request
}

func (w *envWorker) reset(seed uint64) error {
	for k := range w.pols {
		p := &w.pols[k]
		m := p.hi - p.lo
		p.obs = make([]float32, m*w.obsDim)
		p.acts = make([]algo.Acts, m)
		p.req, p.boot = newRequest(k, m, w.obsDim, p.outDim), newRequest(k, 1, w.obsDim, p.outDim)
	}
	for g, v := range w.groups {
		b, err := v.Reset(int64(rng.Derive(seed, "hts/env", w.slot0+g) >> 1))
		if err != nil {
			return fmt.Errorf("hts: reset env %d: %w", w.slot0+g, err)
		}
		for a := range w.agents {
			p := &w.pols[w.of[a]]
			j := g*p.perSlot + w.rank[a]
			copy(p.obs[j*w.obsDim:(j+1)*w.obsDim], b.ObsRow(a))
		}
	}
	p := &w.pols[0]
	for j, e := range w.envs {
		o, _, err := e.Reset(int64(rng.Derive(seed, "hts/env", w.slot0+j) >> 1))
		if err != nil {
			return fmt.Errorf("hts: reset env %d: %w", w.slot0+j, err)
		}
		copy(p.obs[j*w.obsDim:], o)
	}
	return nil
}

func (w *envWorker) collect(ctx context.Context, segs []*sample.Segment, t0 int64) error {
	w.episodes = w.episodes[:0]
	for t := range w.T {
		if err := w.step(ctx, segs, t, t0); err != nil {
			return err
		}
	}
	return w.end(ctx, segs)
}

// infer asks for every policy's outputs on its rows' observations: all
// requests go out before the first answer is awaited, so the policy
// workers can serve them together.
func (w *envWorker) infer(ctx context.Context) error {
	for k := range w.pols {
		if err := w.inf.send(ctx, w.pols[k].req, w.pols[k].obs); err != nil {
			return err
		}
	}
	for k := range w.pols {
		out, err := w.inf.wait(ctx, w.pols[k].req)
		if err != nil {
			return err
		}
		w.pols[k].out = out
	}
	return nil
}

// step takes step t of every env of the worker; t0 is the segment's first
// step of each row (its global step is t0·rows + t·rows + row).
func (w *envWorker) step(ctx context.Context, segs []*sample.Segment, t int, t0 int64) error {
	od, ad := w.obsDim, w.actDim
	for k := range w.pols {
		p := &w.pols[k]
		copy(segs[k].Obs[(t*p.n+p.lo)*od:], p.obs)
	}
	if err := w.infer(ctx); err != nil {
		return err
	}
	if w.groups != nil {
		return w.stepGroups(ctx, segs, t, t0)
	}
	p, seg := &w.pols[0], segs[0]
	step := (t0 + int64(t)) * int64(p.n)
	row := t*p.n + p.lo
	for j, e := range w.envs {
		k := row + j
		a := &p.acts[j]
		p.samplers[j].SampleTo(a, p.out[j*p.outDim:(j+1)*p.outDim], 1, step)
		copy(seg.Actions[k*ad:(k+1)*ad], a.Actions)
		seg.LogProbs[k], seg.Values[k] = a.LogProbs[0], a.Values[0]
		o, r, term, trunc, info, err := e.Step(a.EnvActions)
		if err != nil {
			return fmt.Errorf("hts: env %d: %w", p.lo+j, err)
		}
		seg.Rewards[k], seg.Dones[k] = float32(r), 0
		if term || trunc {
			seg.Dones[k] = 1
			if trunc && !term {
				// Bootstrap from the true final observation with the
				// behaviour policy's value, as the local loop does.
				out, err := w.inf.do(ctx, p.boot, o)
				if err != nil {
					return err
				}
				seg.Rewards[k] += p.gamma * out[p.outDim-1]
			}
			if info.HasEpisode {
				w.episodes = append(w.episodes, episode{Episode: sample.Episode{Return: info.Episode.Return, Length: info.Episode.Length, At: t}})
			}
			if o, _, err = e.Reset(env.NoSeed); err != nil {
				return fmt.Errorf("hts: reset env %d: %w", p.lo+j, err)
			}
		}
		copy(p.obs[j*od:(j+1)*od], o)
	}
	return nil
}

// stepGroups is step for multi-agent slots: every row of a slot samples
// its action with its policy's sampler, then the slot's env steps once for
// all of them (a FlatVector resets an ended episode itself).
func (w *envWorker) stepGroups(ctx context.Context, segs []*sample.Segment, t int, t0 int64) error {
	od := w.obsDim
	for g, v := range w.groups {
		w.groupActs = w.groupActs[:0]
		for a := range w.agents {
			p, seg := &w.pols[w.of[a]], segs[w.of[a]]
			ad := p.actDim
			j := g*p.perSlot + w.rank[a] // the policy's row, within the worker
			k := t*p.n + p.lo + j
			ac := &p.acts[j]
			p.samplers[j].SampleTo(ac, p.out[j*p.outDim:(j+1)*p.outDim], 1, (t0+int64(t))*int64(p.n))
			copy(seg.Actions[k*ad:(k+1)*ad], ac.Actions)
			seg.LogProbs[k], seg.Values[k] = ac.LogProbs[0], ac.Values[0]
			// A slot's row is as wide as its widest agent's action;
			// each agent reads the leading values of its own.
			row := len(w.groupActs)
			w.groupActs = append(w.groupActs, ac.EnvActions...)
			for len(w.groupActs) < row+w.actDim {
				w.groupActs = append(w.groupActs, 0)
			}
		}
		b, err := v.Step(w.groupActs)
		if err != nil {
			return fmt.Errorf("hts: env %d: %w", w.slot0+g, err)
		}
		for a := range w.agents {
			p, seg := &w.pols[w.of[a]], segs[w.of[a]]
			j := g*p.perSlot + w.rank[a]
			k := t*p.n + p.lo + j
			seg.Rewards[k], seg.Dones[k] = b.Rewards[a], 0
			if b.Done(a) {
				seg.Dones[k] = 1
				if b.Truncated[a] && !b.Terminated[a] {
					out, err := w.inf.do(ctx, p.boot, b.FinalObsRow(a))
					if err != nil {
						return err
					}
					seg.Rewards[k] += p.gamma * out[p.outDim-1]
				}
				if info := b.Infos[a]; info.HasEpisode {
					w.episodes = append(w.episodes, episode{Episode: sample.Episode{Return: info.Episode.Return, Length: info.Episode.Length, At: t}, policy: w.of[a]})
				}
			}
			copy(p.obs[j*od:(j+1)*od], b.ObsRow(a))
		}
	}
	return nil
}

// end writes the segment's bootstrap: the observations after its last step
// and their values.
func (w *envWorker) end(ctx context.Context, segs []*sample.Segment) error {
	for k := range w.pols {
		p := &w.pols[k]
		copy(segs[k].NextObs[p.lo*w.obsDim:p.hi*w.obsDim], p.obs)
	}
	if err := w.infer(ctx); err != nil {
		return err
	}
	for k := range w.pols {
		p := &w.pols[k]
		for j := range p.hi - p.lo {
			segs[k].LastValues[p.lo+j] = p.out[(j+1)*p.outDim-1] // on-policy rows end with V(s)
		}
	}
	return nil
}

// request is one env worker's inference request for one policy: rows of
// observations in, rows of outputs back. Each env worker owns its
// requests and reuses them.
type request struct {
	policy int
	obs    []float32
	out    []float32
	err    error
	done   chan struct{}
}

func newRequest(policy, rows, obsDim, outDim int) *request {
	return &request{policy: policy, obs: make([]float32, rows*obsDim), out: make([]float32, rows*outDim), done: make(chan struct{}, 1)}
}

// inference is the in-process inference stream: env workers send requests,
// policy workers take whatever is pending and answer it as one batch per
// policy.
type inference struct {
	reqs chan *request
}

func newInference(capacity int) *inference { return &inference{reqs: make(chan *request, capacity)} }

// do sends obs (some rows) and waits for the outputs.
func (s *inference) do(ctx context.Context, r *request, obs []float32) ([]float32, error) {
	if err := s.send(ctx, r, obs); err != nil {
		return nil, err
	}
	return s.wait(ctx, r)
}

func (s *inference) send(ctx context.Context, r *request, obs []float32) error {
	copy(r.obs, obs)
	select {
	case s.reqs <- r:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *inference) wait(ctx context.Context, r *request) ([]float32, error) {
	select {
	case <-r.done:
		return r.out, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// serve answers requests until ctx ends, batching every request pending
// when it wakes, policy by policy (nets[k] is policy k's). The weights
// change only at barriers, when no request is in flight, so which worker
// answers a request, and with which others, never changes its outputs.
func (s *inference) serve(ctx context.Context, nets []algo.PolicyNet, pols []*policy, obsDim int) {
	var batch, mine []*request
	var obs, out []float32
	for {
		select {
		case r := <-s.reqs:
			batch = append(batch[:0], r)
		case <-ctx.Done():
			return
		}
	drain:
		for {
			select {
			case r := <-s.reqs:
				batch = append(batch, r)
			default:
				break drain
			}
		}
		for k, p := range nets {
			mine = mine[:0]
			for _, r := range batch {
				if r.policy == k {
					mine = append(mine, r)
				}
			}
			if len(mine) == 0 {
				continue
			}
			var err error
			if v := pols[k].store.Latest(); v.N != p.Version() {
				if err = p.SetWeights(v); err != nil {
					err = fmt.Errorf("hts: policy worker: %w", err)
				}
			}
			obs = obs[:0]
			rows := 0
			for _, r := range mine {
				obs = append(obs, r.obs...)
				rows += len(r.obs) / obsDim
			}
			if err == nil {
				out = grow(out, rows*p.OutDim())
				p.ForwardTo(out, obs, rows)
			}
			off := 0
			for _, r := range mine {
				if r.err = err; err == nil {
					off += copy(r.out, out[off:])
				}
				r.done <- struct{}{}
			}
		}
	}
}

func grow(b []float32, n int) []float32 {
	if cap(b) < n {
		return make([]float32, n)
	}
	return b[:n]
}

// joinStopped joins the env workers' errors, but reports a stop that
// reached them all (Ctrl-C: each returns the context's error) once, not
// once per worker.
func joinStopped(errs []error) error {
	var first error
	for _, err := range errs {
		switch {
		case err == nil:
		case !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded):
			return errors.Join(errs...)
		case first == nil:
			first = err
		}
	}
	return first
}
