package flow

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"

	"herd/algo"
	"herd/env"
	"herd/internal/rng"
	"herd/rollout"
	"herd/sample"
	"herd/weights"
)

// Workers are a plan's env workers (RLlib Flow's rollout workers): worker
// k steps a contiguous block of the run's env slots with a policy copy of
// its own, on an Actor of its own. Randomness belongs to env slots, not
// to workers — slot i resets from (seed, "flow/env", i) and samples from
// (seed, "env-worker", i) — so the same envs spread over 1, 2 or 4 workers
// produce the same samples, and a synchronous plan the same bits.
type Workers struct {
	r      *Run
	ws     []*worker
	actors []*Actor
	n, T   int            // envs in all, steps per segment
	enc    encodedWeights // over a transport: the proxies' weights messages
}

// RolloutWorkers builds the run's env workers: numEnvs envs in all, split
// over runtime.env_workers workers (default min(2, numEnvs)), each making
// segments of T steps; gamma discounts the truncation bootstrap.
func RolloutWorkers(r *Run, numEnvs, T int, gamma float32) (*Workers, error) {
	w := r.Header.Runtime.EnvWorkers
	if w == 0 {
		w = min(2, numEnvs)
	}
	if w < 1 || w > numEnvs || T < 1 {
		return nil, fmt.Errorf("%w: env_workers %d must be in 1…num_envs %d (num_steps %d)", ErrConfig, w, numEnvs, T)
	}
	if r.Header.Envs.IsParallel(r.Header.Env) {
		// Rollout workers step single envs, which for a multi-agent id
		// would be the turn view (env.TurnEnv), not the agents' rows.
		return nil, fmt.Errorf("%w: %s is multi-agent; rollout workers do not step agent rows yet (executor local or hts does; examples/twinplan steps them in a plan)", ErrConfig, r.Header.Env)
	}
	if r.Pieces.NewSampler == nil || r.Pieces.NewPolicy == nil {
		return nil, fmt.Errorf("%w: the algorithm has no policy and sampler pieces", ErrConfig)
	}
	ws := &Workers{r: r, n: numEnvs, T: T}
	r.onClose(func() { closeWorkers(ws.actors, ws.ws) })
	set := r.newWorkerSet()
	for k := range w {
		lo, hi := k*numEnvs/w, (k+1)*numEnvs/w
		ws.actors = append(ws.actors, NewActor())
		if r.remote != nil {
			// The worker serves its actor over the transport; the driver
			// keeps a proxy that holds no envs.
			px := &worker{id: k, lo: lo, hi: hi, T: T, total: numEnvs, r: r, enc: &ws.enc}
			init := func(inc uint64) []byte { return rolloutInit(k, lo, hi, T, numEnvs, gamma, inc, px.steps) }
			var err error
			if px.proxy, err = r.remote.open(r, actorName(set, k), init); err != nil {
				return nil, err
			}
			ws.ws = append(ws.ws, px)
			continue
		}
		wk := &worker{id: k, lo: lo, hi: hi, T: T, total: numEnvs, gamma: gamma, r: r}
		ws.ws = append(ws.ws, wk)
		if err := wk.init(); err != nil {
			return nil, err
		}
	}
	ws.register(set)
	return ws, nil
}

// closeWorkers stops a worker set's actors, then closes its workers.
func closeWorkers[W interface{ close() }](actors []*Actor, ws []W) {
	for _, a := range actors {
		a.Close()
	}
	for _, w := range ws {
		w.close()
	}
}

// Len is the number of workers.
func (ws *Workers) Len() int { return len(ws.ws) }

// ParallelRollouts is the ParIter of the workers' segments: each item is
// one segment of T steps of a worker's envs, made on its actor with the
// weights it holds (Segment.Version) when the item is asked for. Workers
// stop (ErrEnd) when the run's env-step budget is spent.
func ParallelRollouts(ws *Workers) ParIter[*sample.Segment] {
	shards := make([]Shard[*sample.Segment], len(ws.ws))
	for k, w := range ws.ws {
		shards[k] = Shard[*sample.Segment]{Actor: ws.actors[k], Next: w.segment, Claim: w.claim}
	}
	p := NewParIter(ws.r.Ctx, shards)
	p.r = ws.r
	return p
}

// UpdateWeights sends v to worker k (k < 0: every worker): a message to
// its actor, run before anything asked of the worker afterwards.
func (ws *Workers) UpdateWeights(k int, v *weights.Version) {
	for j, w := range ws.ws {
		if k < 0 || k == j {
			ws.actors[j].Send(func() { w.setWeights(v) })
		}
	}
}

// worker is one env worker's state; only its actor touches it.
type worker struct {
	r              *Run
	id, lo, hi, T  int
	total          int // the plan's envs, over all workers
	obsDim, actDim int
	gamma          float32
	envs           []env.Env   // the envs of loop's vector, by slot
	srcs           []*rand.PCG // each slot's sampler stream
	vec            env.Vector  // the worker's envs (nil over a transport)
	loop           *rollout.Segments
	policy         algo.PolicyNet
	version        *weights.Version // the weights the policy holds (nil: the initial ones)
	pending        *weights.Version // over a transport: weights to send with the next segment call
	err            error            // a failed weight update, reported by the next item
	steps          int64            // the global env step of the next segment's first step (the samplers' schedule step)
	claimed        int64            // segments claimed (by the goroutine that asks for them)
	inc            uint64           // which start of the worker this is (0, 1: the first)
	learner        GradientLearner  // built on first ComputeGradients
	proxy          *proxy           // over a transport: the worker's actor (envs elsewhere)
	enc            *encodedWeights  // the proxy's weights messages
	// restart: the envs cannot save their state, so checkpoints leave
	// them out and a resumed worker starts new episodes.
	restart bool
}

func (w *worker) close() {
	if w.vec != nil {
		w.vec.Close()
	} else {
		for _, e := range w.envs {
			e.Close()
		}
	}
	if w.learner != nil {
		w.learner.Close()
	}
}

func (w *worker) init() error {
	h, pc := w.r.Header, w.r.Pieces
	w.obsDim, w.actDim = w.r.Spaces.Obs.Dim(), w.r.Spaces.Act.Dim()
	var err error
	if w.policy, err = pc.NewPolicy(); err != nil {
		return err
	}
	n := w.hi - w.lo
	obs := make([]float32, n*w.obsDim)
	actStream, envStream := streams(w.inc)
	var samplers []algo.Sampler
	for j := range n {
		slot := w.lo + j
		e, err := h.Envs.Make(h.Env, env.WithEpisodeStatistics())
		if err != nil {
			return err
		}
		w.envs = append(w.envs, e)
		src := rng.Source(h.Seed, actStream, slot)
		w.srcs = append(w.srcs, src)
		s, err := pc.NewSampler(1, rand.New(src))
		if err != nil {
			return err
		}
		samplers = append(samplers, s)
		// Each env's reset seed comes from its slot, so the envs do not
		// depend on how slots are spread over workers.
		o, _, err := e.Reset(int64(rng.Derive(h.Seed, envStream, slot) >> 1))
		if err != nil {
			return fmt.Errorf("flow: reset env %d: %w", slot, err)
		}
		copy(obs[j*w.obsDim:], o)
	}
	vec, err := env.NewSyncVectorOf(w.envs)
	if err != nil {
		return err
	}
	w.vec = vec
	w.loop = rollout.NewSegments(w.id, vec, rollout.NewSlots(w.policy, samplers), w.gamma)
	w.loop.Start(obs)
	return nil
}

func (w *worker) setWeights(v *weights.Version) {
	if w.proxy != nil {
		// Sent with the next segment call (one round trip, not two).
		w.pending = v
		w.version = v
		return
	}
	if err := w.policy.SetWeights(v); err != nil {
		w.err = fmt.Errorf("flow: worker %d: %w", w.id, err)
		return
	}
	w.version = v
}

// claim takes the env steps of the worker's next segment from the
// run's budget (Shard.Claim).
func (w *worker) claim() bool {
	if !w.r.claimItem(w.claimed, int64((w.hi-w.lo)*w.T)) {
		return false
	}
	w.claimed++
	return true
}

// segment steps the worker's envs T times and returns the segment: per
// step one batched forward pass of the policy, then each env's own
// sampler on its row (rows are bit-independent of the batch), so the
// samples do not depend on how slots are spread over workers.
func (w *worker) segment() (*sample.Segment, error) {
	if w.err != nil {
		return nil, w.err
	}
	if w.proxy != nil {
		req, wbody := []byte{opSegment}, []byte(nil)
		if w.pending != nil {
			var err error
			if wbody, req, err = w.enc.bodies(w.pending); err != nil {
				return nil, err
			}
		}
		b, err := w.proxy.call(req)
		if err != nil {
			return nil, err
		}
		if wbody != nil {
			// A restart's rejoin sends the last weights the worker got.
			w.proxy.weights, w.pending = wbody, nil
		}
		// The worker's next start continues its schedules from here.
		w.steps += int64(w.total * w.T)
		seg, err := sample.DecodeSegment(b)
		if err != nil {
			return nil, fmt.Errorf("flow: worker %d's segment: %w", w.id, err)
		}
		if od, ad := w.r.Spaces.Obs.Dim(), w.r.Spaces.Act.Dim(); seg.T != w.T || seg.N != w.hi-w.lo || seg.ObsDim != od || seg.ActDim != ad {
			return nil, fmt.Errorf("flow: worker %d sent a segment of %d steps × %d envs × (%d obs, %d act), want %d × %d × (%d, %d)",
				w.id, seg.T, seg.N, seg.ObsDim, seg.ActDim, w.T, w.hi-w.lo, od, ad)
		}
		return seg, nil
	}
	return w.produce()
}

// produce makes the segment of steps already claimed: the on-policy loop
// with one batched forward pass per step and each env's own sampler on its
// row (rows are bit-independent of the batch), so the samples do not
// depend on how slots are spread over workers.
func (w *worker) produce() (*sample.Segment, error) {
	seg := sample.NewSegment(w.T, w.hi-w.lo, w.obsDim, w.actDim)
	// Round by round, every worker's segment covers the same global steps
	// (the local loop's: one vector step of all the plan's envs is
	// numEnvs env steps), so a sampler's schedule reads the same step for
	// any number of workers.
	w.loop.Steps, w.loop.Stride = w.steps, int64(w.total)
	if err := w.loop.Collect(seg); err != nil {
		return nil, fmt.Errorf("flow: worker %d: %w", w.id, err)
	}
	w.steps = w.loop.Steps
	return seg, nil
}

// ConcatBatches joins each round of segments (GatherSync's, in worker
// order) into one segment of all the envs, slot order: the batch the local
// executor would have collected, with each env's recorded starting state
// for a recurrent policy (Segment.State). Episodes are ordered by (step, env).
func ConcatBatches(it Iter[[]*sample.Segment]) Iter[*sample.Segment] {
	return ForEach(it, concat)
}

func concat(segs []*sample.Segment) (*sample.Segment, error) {
	if len(segs) == 1 {
		return segs[0], nil
	}
	s0 := segs[0]
	sd := 0 // a recurrent policy's state width per env, every worker's the same
	if s0.N > 0 {
		sd = len(s0.State) / s0.N
	}
	n := 0
	for _, s := range segs {
		if s.T != s0.T || s.ObsDim != s0.ObsDim || s.ActDim != s0.ActDim || len(s.State) != s.N*sd {
			return nil, fmt.Errorf("%w: flow: segments of different shapes", sample.ErrShape)
		}
		n += s.N
	}
	T, od, ad := s0.T, s0.ObsDim, s0.ActDim
	out := sample.NewSegment(T, n, od, ad)
	if sd > 0 {
		out.State = make([]float32, 0, n*sd) // env lo+i's row is its worker's row i
	}
	out.Version, out.Worker = s0.Version, -1
	lo := 0
	for _, s := range segs {
		out.Version = min(out.Version, s.Version)
		m := s.N
		for t := range T {
			dst, src := t*n+lo, t*m
			copy(out.Obs[dst*od:(dst+m)*od], s.Obs[src*od:(src+m)*od])
			copy(out.Actions[dst*ad:(dst+m)*ad], s.Actions[src*ad:(src+m)*ad])
			copy(out.LogProbs[dst:dst+m], s.LogProbs[src:src+m])
			copy(out.Values[dst:dst+m], s.Values[src:src+m])
			copy(out.Rewards[dst:dst+m], s.Rewards[src:src+m])
			copy(out.Dones[dst:dst+m], s.Dones[src:src+m])
		}
		copy(out.NextObs[lo*od:(lo+m)*od], s.NextObs)
		copy(out.LastValues[lo:lo+m], s.LastValues)
		out.State = append(out.State, s.State...)
		out.Episodes = append(out.Episodes, s.Episodes...)
		lo += m
	}
	// Workers are in slot order, so a stable sort by step gives (step, env).
	slices.SortStableFunc(out.Episodes, func(a, b sample.Episode) int { return a.At - b.At })
	return out, nil
}

// segmentReport is the Report of a learned segment: its steps and its
// episodes at the env steps they ended.
func segmentReport(seg *sample.Segment, stats []algo.Stat) Report {
	eps := make([]sample.Episode, len(seg.Episodes))
	for i, e := range seg.Episodes {
		e.At = (e.At + 1) * seg.N
		eps[i] = e
	}
	return Report{Steps: int64(seg.T * seg.N), Episodes: eps, Stats: stats}
}

// SegmentLearner builds the run's learner (Pieces.NewSegmentLearner), whose
// model Train returns; Train closes it.
func SegmentLearner(r *Run) (algo.SegmentLearner, error) {
	if r.Pieces.NewSegmentLearner == nil {
		return nil, fmt.Errorf("%w: the algorithm is not on-policy", ErrConfig)
	}
	l, err := r.Pieces.NewSegmentLearner()
	if err != nil {
		return nil, err
	}
	r.onClose(func() { l.Close() })
	r.registerLearner(l)
	m, ok := l.(algo.Modeler)
	if !ok {
		return nil, fmt.Errorf("%w: the learner %T cannot hand out its model", ErrConfig, l)
	}
	r.track(m.Model())
	return l, nil
}

// TrainOneStep learns on each segment (one Learn call) and then sends the
// new weights to every worker: after GatherSync, the next round is
// collected with them.
func TrainOneStep(ws *Workers, l algo.SegmentLearner) func(*sample.Segment) (Report, error) {
	return func(seg *sample.Segment) (Report, error) {
		stats, err := l.Learn(ws.r.Ctx, seg)
		if err != nil {
			return Report{}, err
		}
		ws.UpdateWeights(-1, l.Weights())
		return segmentReport(seg, stats), nil
	}
}

// GradientLearner is a SegmentLearner whose update is cut into a gradient
// step, which workers run on their own copies, and an apply step, which
// the driver's learner runs (A3C).
type GradientLearner interface {
	algo.SegmentLearner
	// NewGrad returns a gradient buffer sized for the learner.
	NewGrad() *algo.Grad
	// ComputeGradients writes the gradient of the algorithm's loss on seg
	// at weights v (nil: the learner's own) into g and returns the loss
	// scalars; it takes no optimizer step.
	ComputeGradients(ctx context.Context, seg *sample.Segment, v *weights.Version, g *algo.Grad) ([]algo.Stat, error)
	// ApplyGradients takes one optimizer step with g and counts one update.
	ApplyGradients(g *algo.Grad) error
}

// Gradients are a worker's gradient on one of its segments.
type Gradients struct {
	Grad   *algo.Grad
	Worker int
	// Version is the weights version the worker acted and computed with.
	Version uint64
	Report  Report
}

// ComputeGradients computes each segment's gradient on the worker that
// made it (run inside ParForEach, on the worker's actor), with a copy of
// the learner at the weights the worker acted with.
func ComputeGradients(ws *Workers) func(*sample.Segment) (Gradients, error) {
	return func(seg *sample.Segment) (Gradients, error) {
		w := ws.ws[seg.Worker]
		if w.learner == nil {
			l, err := ws.r.Pieces.NewSegmentLearner()
			if err != nil {
				return Gradients{}, err
			}
			gl, ok := l.(GradientLearner)
			if !ok {
				l.Close()
				return Gradients{}, fmt.Errorf("%w: the learner %T cannot compute gradients", ErrConfig, l)
			}
			w.learner = gl
		}
		g := w.learner.NewGrad() // a new buffer per item: the driver owns it once yielded
		stats, err := w.learner.ComputeGradients(ws.r.Ctx, seg, w.version, g)
		if err != nil {
			return Gradients{}, err
		}
		return Gradients{Grad: g, Worker: w.id, Version: seg.Version, Report: segmentReport(seg, stats)}, nil
	}
}

// ApplyGradients applies each gradient with the driver's learner as it
// arrives and sends the new weights to the worker that computed it (A3C:
// the other workers get theirs when their own gradients are applied). It
// adds the scalar charts/policy_lag: the updates applied since the
// gradient's weights version (0 for a gradient computed at the newest).
func ApplyGradients(ws *Workers, l algo.SegmentLearner) func(Gradients) (Report, error) {
	return func(g Gradients) (Report, error) {
		gl, ok := l.(GradientLearner)
		if !ok {
			return Report{}, fmt.Errorf("%w: the learner %T cannot apply gradients", ErrConfig, l)
		}
		if err := gl.ApplyGradients(g.Grad); err != nil {
			return Report{}, err
		}
		v := l.Weights()
		ws.UpdateWeights(g.Worker, v)
		rep := g.Report
		rep.Stats = append(rep.Stats, algo.Stat{Name: "charts/policy_lag", Value: float64(v.N-1) - float64(g.Version)})
		return rep, nil
	}
}
