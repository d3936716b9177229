package flow

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"

	"herd/algo"
	"herd/env"
	"herd/internal/rng"
	"herd/internal/scratch"
	"herd/internal/trainstate"
	"herd/rollout"
	"herd/sample"
	"herd/weights"
)

// ReplayWorkers are the env workers of an off-policy plan (DQN, Ape-X):
// runtime.env_workers workers (default 1), each stepping numEnvs envs of
// its own with a policy copy, a sampler drawing from (seed, "env-worker",
// k) and, with several workers, told it is actor k of them
// (algo.ActorExplorer: Ape-X's fixed ε_k), the algorithm's n-step
// assembler and, for Ape-X, a prioritizer that sets each transition's
// initial priority with the worker's policy copy.
// One item is stepsPerItem vector steps' transitions. OffPolicySlotWorkers
// builds them the other way, num_envs spread over the workers with
// randomness per env slot.
type ReplayWorkers struct {
	r      *Run
	ws     []*replayWorker
	actors []*Actor
	enc    encodedWeights // over a transport: the proxies' weights messages
	// every is SyncEvery's period in a worker's env steps (0: every update
	// reaches every worker); latest is then the learner's newest version.
	every  int64
	latest atomic.Pointer[weights.Version]
}

// Experience is one worker item: the transitions it assembled, and the
// Report of its env steps and episodes.
type Experience struct {
	Transitions *sample.Transitions
	Report      Report
}

// OffPolicyWorkers builds the run's off-policy env workers.
func OffPolicyWorkers(r *Run, numEnvs, stepsPerItem int) (*ReplayWorkers, error) {
	return offPolicyWorkers(r, numEnvs, stepsPerItem, false)
}

// OffPolicySlotWorkers builds the off-policy env workers of a synchronous
// plan (DQN's): numEnvs envs in all, split over runtime.env_workers
// workers (default 1) in contiguous blocks of slots, as RolloutWorkers
// splits them. Randomness belongs to the slots: slot i resets from (seed,
// "flow/env", i), samples from (seed, "env-worker", i) and has an n-step
// assembler of its own, and the policy's rows do not depend on the batch;
// an item is one vector step of the worker's slots, its transitions slot
// by slot. So ConcatExperience's rounds, and a synchronous plan's
// parameters, are the same for any number of workers — except with
// apex_epsilon, where each worker is an actor with an ε of its own.
func OffPolicySlotWorkers(r *Run, numEnvs int) (*ReplayWorkers, error) {
	return offPolicyWorkers(r, numEnvs, 1, true)
}

func offPolicyWorkers(r *Run, numEnvs, stepsPerItem int, slots bool) (*ReplayWorkers, error) {
	pc := r.Pieces
	if pc.NewAssembler == nil || pc.NewPolicy == nil || pc.NewSampler == nil {
		return nil, fmt.Errorf("%w: the algorithm has no off-policy pieces", ErrConfig)
	}
	w := max(r.Header.Runtime.EnvWorkers, 1)
	if numEnvs < 1 || stepsPerItem < 1 {
		return nil, fmt.Errorf("%w: num_envs %d and steps per item %d must be ≥ 1", ErrConfig, numEnvs, stepsPerItem)
	}
	if slots && w > numEnvs {
		return nil, fmt.Errorf("%w: env_workers %d must be in 1…num_envs %d (the plan spreads num_envs over its workers)", ErrConfig, w, numEnvs)
	}
	ws := &ReplayWorkers{r: r}
	r.onClose(func() { closeWorkers(ws.actors, ws.ws) })
	set := r.newWorkerSet()
	for k := range w {
		ws.actors = append(ws.actors, NewActor())
		lo, hi := 0, numEnvs
		if slots {
			lo, hi = k*numEnvs/w, (k+1)*numEnvs/w
		}
		if r.remote != nil {
			// The worker serves its actor over the transport; the driver
			// keeps a proxy that holds no envs.
			px := &replayWorker{r: r, id: k, n: hi - lo, steps: stepsPerItem, workers: w, enc: &ws.enc, ws: ws, slots: slots, total: numEnvs}
			init := func(inc uint64) []byte { return replayInit(k, numEnvs, stepsPerItem, w, inc) }
			if slots {
				init = func(inc uint64) []byte { return replaySlotsInit(k, lo, hi, w, inc) }
			}
			var err error
			if px.proxy, err = r.remote.open(r, actorName(set, k), init); err != nil {
				return nil, err
			}
			ws.ws = append(ws.ws, px)
			continue
		}
		var wk *replayWorker
		var err error
		if slots {
			wk, err = newSlotReplayWorker(r, k, lo, hi, w, 1)
			if wk != nil {
				wk.total = numEnvs
			}
		} else {
			wk, err = newReplayWorker(r, k, numEnvs, stepsPerItem, w, 1)
		}
		if wk != nil {
			wk.ws = ws
			ws.ws = append(ws.ws, wk)
		}
		if err != nil {
			return nil, err
		}
	}
	ws.register(set)
	return ws, nil
}

// newReplayWorker builds start inc of worker k of w (numEnvs envs,
// stepsPerItem vector steps per item); on error, what it returns (if not
// nil) must be closed.
func newReplayWorker(r *Run, k, numEnvs, stepsPerItem, w int, inc uint64) (*replayWorker, error) {
	pc, h := r.Pieces, r.Header
	if pc.NewAssembler == nil || pc.NewPolicy == nil || pc.NewSampler == nil {
		return nil, fmt.Errorf("%w: the algorithm has no off-policy pieces", ErrConfig)
	}
	wk := &replayWorker{r: r, id: k, n: numEnvs, steps: stepsPerItem, workers: w}
	var err error
	if wk.envs, err = h.Envs.MakeVector(h.Env, numEnvs, env.Sync, env.WithEpisodeStatistics()); err != nil {
		return nil, err
	}
	if wk.policy, err = pc.NewPolicy(); err != nil {
		return wk, err
	}
	actStream, envStream := streams(inc)
	src := rng.Source(h.Seed, actStream, k)
	sampler, err := pc.NewSampler(numEnvs, rand.New(src))
	if err != nil {
		return wk, err
	}
	// Ape-X's exploration is per actor: worker k of w acts at ε_k, here
	// as on a worker's host (both build their worker here); a sampler
	// without apex_epsilon, and a single worker, keep the ε schedule.
	if ae, ok := sampler.(algo.ActorExplorer); ok && w > 1 {
		ae.SetActor(k, w)
	}
	assembler, err := pc.NewAssembler(numEnvs)
	if err != nil {
		return wk, err
	}
	if pc.NewPrioritizer != nil {
		if wk.prio, err = pc.NewPrioritizer(); err != nil {
			return wk, err
		}
	}
	if wk.loop, err = rollout.NewTransitions(wk.envs, rollout.NewInline(wk.policy, sampler), assembler); err != nil {
		return wk, err
	}
	// What a checkpoint saves (replayWorker.state), as a slot worker's.
	wk.srcs, wk.samplers, wk.assemblers, wk.obs = []*rand.PCG{src}, []algo.Sampler{sampler}, []algo.Assembler{assembler}, wk.loop.Obs
	if err := wk.loop.Reset(int64(rng.Derive(h.Seed, envStream, k) >> 1)); err != nil {
		return wk, fmt.Errorf("flow: worker %d: %w", k, err)
	}
	return wk, nil
}

// newSlotReplayWorker builds start inc of slot worker k of w, envs
// lo…hi−1 (OffPolicySlotWorkers); on error, what it returns (if not nil)
// must be closed.
func newSlotReplayWorker(r *Run, k, lo, hi, w int, inc uint64) (*replayWorker, error) {
	if lo < 0 || hi <= lo || w < 1 || k >= w {
		return nil, fmt.Errorf("%w: slot worker %d of %d with envs %d…%d", ErrConfig, k, w, lo, hi-1)
	}
	pc, h := r.Pieces, r.Header
	if pc.NewAssembler == nil || pc.NewPolicy == nil || pc.NewSampler == nil {
		return nil, fmt.Errorf("%w: the algorithm has no off-policy pieces", ErrConfig)
	}
	n := hi - lo
	wk := &replayWorker{r: r, id: k, n: n, steps: 1, workers: w, slots: true, lo: lo}
	var err error
	if wk.policy, err = pc.NewPolicy(); err != nil {
		return wk, err
	}
	od := r.Spaces.Obs.Dim()
	wk.obs = make([]float32, n*od)
	wk.out = &rowOutputs{width: wk.policy.OutDim()}
	actStream, envStream := streams(inc)
	for j := range n {
		slot := lo + j
		v, err := h.Envs.MakeVector(h.Env, 1, env.Sync, env.WithEpisodeStatistics())
		if err != nil {
			return wk, err
		}
		wk.vecs = append(wk.vecs, v)
		src := rng.Source(h.Seed, actStream, slot)
		s, err := pc.NewSampler(1, rand.New(src))
		if err != nil {
			return wk, err
		}
		if ae, ok := s.(algo.ActorExplorer); ok && w > 1 {
			ae.SetActor(k, w)
		}
		a, err := pc.NewAssembler(1)
		if err != nil {
			return wk, err
		}
		wk.srcs, wk.samplers, wk.assemblers = append(wk.srcs, src), append(wk.samplers, s), append(wk.assemblers, a)
		loop, err := rollout.NewTransitions(v, &rowPolicy{out: wk.out, row: j, sampler: s}, a)
		if err != nil {
			return wk, err
		}
		// The slots' observations sit side by side for one batched
		// forward pass.
		loop.Obs = wk.obs[j*od : (j+1)*od]
		if err := loop.Reset(int64(rng.Derive(h.Seed, envStream, slot) >> 1)); err != nil {
			return wk, fmt.Errorf("flow: env %d: %w", slot, err)
		}
		wk.slotLoops = append(wk.slotLoops, loop)
	}
	if pc.NewPrioritizer != nil {
		if wk.prio, err = pc.NewPrioritizer(); err != nil {
			return wk, err
		}
	}
	return wk, nil
}

func (w *replayWorker) close() {
	if w.envs != nil {
		w.envs.Close()
	}
	for _, v := range w.vecs {
		v.Close()
	}
}

// Len is the number of workers.
func (ws *ReplayWorkers) Len() int { return len(ws.ws) }

// OffPolicyRollouts is the ParIter of the workers' experience; workers end
// when the run's env-step budget is spent.
func OffPolicyRollouts(ws *ReplayWorkers) ParIter[Experience] {
	shards := make([]Shard[Experience], len(ws.ws))
	for k, w := range ws.ws {
		shards[k] = Shard[Experience]{Actor: ws.actors[k], Next: w.experience}
	}
	p := NewParIter(ws.r.Ctx, shards)
	p.r = ws.r
	return p
}

// UpdateWeights sends v to every worker (a message to each actor), or,
// after SyncEvery, makes v the version a worker copies when it is due.
func (ws *ReplayWorkers) UpdateWeights(v *weights.Version) {
	if ws.every > 0 {
		ws.latest.Store(v)
		return
	}
	for k, w := range ws.ws {
		ws.actors[k].Send(func() { w.setWeights(v) })
	}
}

// SyncEvery makes each worker copy the learner's newest weights once it
// has taken n env steps of its own since its last copy, instead of
// receiving every update: Ape-X's actors (Horgan et al. 2018, "copy the
// network parameters from the learner" every 400 frames). The check runs
// on the worker's actor before each of its items, so the period is in
// whole items (n rounded up to a multiple of the item's env steps), and a
// due worker whose weights are already the newest gets no message. Over a
// transport each copy is one weights call instead of one per update.
// n ≤ 0 keeps the default: every update reaches every worker before its
// next item. Call it before the plan runs.
func (ws *ReplayWorkers) SyncEvery(n int) {
	ws.every = int64(max(n, 0))
}

// resumeLatest makes a resumed run's workers, under SyncEvery, copy the
// restored learner's weights when they are next due, as they would have
// copied the newest version before the checkpoint (none before the
// learner's first update).
func (ws *ReplayWorkers) resumeLatest(l algo.TransitionLearner) {
	ws.r.register(part{
		save: func(context.Context, map[string][]byte) error { return nil },
		restore: func(*trainstate.State) error {
			if v := l.Weights(); ws.every > 0 && v.N > 0 {
				ws.latest.Store(v)
			}
			return nil
		},
	})
}

// Syncs returns, per worker, the weights messages it has been sent so far
// (copies of the learner's weights it took).
func (ws *ReplayWorkers) Syncs() []int64 {
	out := make([]int64, len(ws.ws))
	for k, w := range ws.ws {
		out[k] = w.syncs.Load()
	}
	return out
}

func (w *replayWorker) setWeights(v *weights.Version) {
	w.held = v
	w.syncs.Add(1)
	if w.proxy != nil {
		if err := w.proxy.sendWeights(w.enc, v); err != nil {
			w.err = err
		}
		return
	}
	if err := w.policy.SetWeights(v); err != nil {
		w.err = fmt.Errorf("flow: worker %d: %w", w.id, err)
	}
}

type replayWorker struct {
	r       *Run
	id, n   int
	steps   int
	workers int   // in the run
	made    int64 // items so far
	envs    env.Vector
	policy  algo.PolicyNet
	loop    *rollout.Transitions
	prio    algo.Prioritizer
	err     error
	proxy   *proxy          // over a transport: the worker's actor (envs elsewhere)
	enc     *encodedWeights // the proxy's weights messages
	ws      *ReplayWorkers  // the driver's set (nil on a worker's host)
	since   int64           // env steps since the last copy (SyncEvery)
	held    *weights.Version
	syncs   atomic.Int64 // weights messages taken
	// slots: a slot worker (OffPolicySlotWorkers), one env, sampler and
	// assembler per slot; total is the run's envs (the driver's step).
	slots     bool
	lo, total int // a slot worker's first slot
	vecs      []env.Vector
	slotLoops []*rollout.Transitions
	// Each slot's sampler stream, sampler and assembler (an Ape-X
	// worker's one over all its envs), which a checkpoint saves (their state beside the stream: OU noise, the
	// n-step transitions not yet complete).
	srcs       []*rand.PCG
	samplers   []algo.Sampler
	assemblers []algo.Assembler
	// restart: the envs cannot save their state, so checkpoints leave
	// them out (with the assemblers' pending steps) and a resumed worker
	// starts new episodes.
	restart bool
	obs     []float32   // the observations acted on next, env order
	out     *rowOutputs // a slot worker's policy outputs for them
}

// rowOutputs holds one batched forward pass of a slot worker's policy,
// which each slot's loop samples its own row from.
type rowOutputs struct {
	width int
	rows  []float32
}

// rowPolicy is a slot's Policy: its sampler on its row of the shared
// forward pass.
type rowPolicy struct {
	out     *rowOutputs
	row     int
	sampler algo.Sampler
}

func (p *rowPolicy) Act(acts *algo.Acts, _ []float32, n int, step int64) error {
	w := p.out.width
	p.sampler.SampleTo(acts, p.out.rows[p.row*w:(p.row+1)*w], n, step)
	return nil
}

// ResetEnv forwards an episode's end to a sampler with per-env state.
func (p *rowPolicy) ResetEnv(i int) {
	if r, ok := p.sampler.(algo.EnvResetter); ok {
		r.ResetEnv(i)
	}
}

// experience takes `steps` vector steps, claimed from the budget at once
// (ErrEnd when fewer are left).
func (w *replayWorker) experience() (Experience, error) {
	if w.err != nil {
		return Experience{}, w.err
	}
	size := int64(w.n * w.steps)
	if !w.r.claimItem(w.made, size) { // the whole item, or nothing
		return Experience{}, ErrEnd
	}
	// The schedules' step: where this item falls when the workers' items
	// interleave in turn — the claim order would differ between runs.
	start := (w.made*int64(w.workers) + int64(w.id)) * size
	if w.slots {
		// Round made is the made-th vector step of every slot.
		start = w.made * int64(w.total)
	}
	w.made++
	if every := w.ws.every; every > 0 {
		if w.since >= every {
			w.since = 0
			if v := w.ws.latest.Load(); v != nil && (w.held == nil || v.N != w.held.N) {
				w.setWeights(v)
				if w.err != nil {
					return Experience{}, w.err
				}
			}
		}
		w.since += size
	}
	if w.proxy != nil {
		b, err := w.proxy.call(binary.LittleEndian.AppendUint64([]byte{opExperience}, uint64(start)))
		if err != nil {
			return Experience{}, err
		}
		return decodeExperience(b)
	}
	return w.produce(start)
}

// produce takes the steps already claimed, the first at global step start.
func (w *replayWorker) produce(start int64) (Experience, error) {
	if w.slots {
		return w.produceSlots(start)
	}
	tr := &sample.Transitions{}
	var rep Report
	for s := range w.steps {
		e0 := len(tr.Episodes)
		if err := w.loop.Step(start+int64(s*w.n), tr); err != nil {
			return Experience{}, fmt.Errorf("flow: worker %d: %w", w.id, err)
		}
		rep.Steps += int64(w.n)
		for _, e := range tr.Episodes[e0:] {
			rep.Episodes = append(rep.Episodes, sample.Episode{Return: e.Return, Length: e.Length, At: int(rep.Steps)})
		}
	}
	tr.Version, tr.Worker = w.policy.Version(), w.id
	if w.prio != nil && tr.N > 0 {
		if err := w.prio.Prioritize(tr, w.policy); err != nil {
			return Experience{}, err
		}
	}
	return Experience{Transitions: tr, Report: rep}, nil
}

// produceSlots takes one vector step of a slot worker at global step
// start: one batched forward pass, then each slot's sampler, env and
// assembler in slot order. Episodes are reported at the step's end.
func (w *replayWorker) produceSlots(start int64) (Experience, error) {
	tr := &sample.Transitions{}
	rep := Report{Steps: int64(w.n)}
	w.out.rows = w.policy.ForwardTo(scratch.Resize(w.out.rows, w.n*w.out.width), w.obs, w.n)
	for _, loop := range w.slotLoops {
		e0 := len(tr.Episodes)
		if err := loop.Step(start, tr); err != nil {
			return Experience{}, fmt.Errorf("flow: worker %d: %w", w.id, err)
		}
		for _, e := range tr.Episodes[e0:] {
			rep.Episodes = append(rep.Episodes, sample.Episode{Return: e.Return, Length: e.Length, At: w.n})
		}
	}
	tr.Version, tr.Worker = w.policy.Version(), w.id
	if w.prio != nil && tr.N > 0 {
		if err := w.prio.Prioritize(tr, w.policy); err != nil {
			return Experience{}, err
		}
	}
	return Experience{Transitions: tr, Report: rep}, nil
}

// ConcatExperience joins each round of slot workers' items (GatherSync's,
// in worker order) into one item of all the slots, slot order: the item
// one worker with every slot would have made. Its episodes end at the
// round's last env step.
func ConcatExperience(it Iter[[]Experience]) Iter[Experience] {
	return ForEach(it, func(xs []Experience) (Experience, error) {
		if len(xs) == 1 {
			return xs[0], nil
		}
		tr := &sample.Transitions{Worker: -1, Version: xs[0].Transitions.Version}
		var rep Report
		for _, x := range xs {
			t := x.Transitions
			if t.N > 0 && tr.N > 0 && (t.ObsDim != tr.ObsDim || t.ActDim != tr.ActDim || len(t.Priorities) > 0 != (len(tr.Priorities) > 0)) {
				return Experience{}, fmt.Errorf("%w: flow: transitions of different shapes", sample.ErrShape)
			}
			if tr.N == 0 && (t.N > 0 || tr.ObsDim == 0) {
				tr.ObsDim, tr.ActDim = t.ObsDim, t.ActDim
			}
			tr.N += t.N
			tr.Version = min(tr.Version, t.Version)
			tr.Obs = append(tr.Obs, t.Obs...)
			tr.Actions = append(tr.Actions, t.Actions...)
			tr.Rewards = append(tr.Rewards, t.Rewards...)
			tr.NextObs = append(tr.NextObs, t.NextObs...)
			tr.Discounts = append(tr.Discounts, t.Discounts...)
			tr.Dones = append(tr.Dones, t.Dones...)
			tr.Priorities = append(tr.Priorities, t.Priorities...)
			tr.Episodes = append(tr.Episodes, t.Episodes...)
			rep.Steps += x.Report.Steps
			rep.Episodes = append(rep.Episodes, x.Report.Episodes...)
			rep.Stats = append(rep.Stats, x.Report.Stats...)
		}
		for i := range rep.Episodes {
			rep.Episodes[i].At = int(rep.Steps)
		}
		return Experience{Transitions: tr, Report: rep}, nil
	})
}

// TransitionLearner builds the run's off-policy learner, whose model Train
// returns, and the replay memory it learns from.
func TransitionLearner(r *Run) (algo.TransitionLearner, algo.Replay, error) {
	pc := r.Pieces
	if pc.NewTransitionLearner == nil || pc.NewReplay == nil {
		return nil, nil, fmt.Errorf("%w: the algorithm is not off-policy", ErrConfig)
	}
	l, err := pc.NewTransitionLearner()
	if err != nil {
		return nil, nil, err
	}
	r.onClose(func() { l.Close() })
	m, ok := l.(algo.Modeler)
	if !ok {
		return nil, nil, fmt.Errorf("%w: the learner %T cannot hand out its model", ErrConfig, l)
	}
	r.track(m.Model())
	rb, err := pc.NewReplay()
	if err != nil {
		return nil, nil, err
	}
	// The learner's whole state and the replay's, as the local executor
	// saves them.
	if pc.Checkpoint == nil {
		r.noCheckpoints(fmt.Sprintf("the learner %T and replay %T cannot save their state", l, rb))
	} else if lc, err := pc.Checkpoint(l, rb); err != nil {
		r.noCheckpoints(err.Error())
	} else {
		r.registerCheckpoint(lc)
	}
	return l, rb, nil
}

// Ledger counts the env steps stored in replay and those whose updates
// the learner has run, between a store sub-flow and a replay sub-flow:
// the replay sub-flow runs exactly the updates due for the stored steps
// (the algorithm's replay ratio), and with MaxLag > 0 the store sub-flow
// waits while it is more than MaxLag steps ahead of the learner. Waiting
// parks on a channel and ends with the run's context, or when the other
// sub-flow has ended: a failed replay sub-flow releases a store sub-flow
// waiting on the bound, which then ends without an item, so the failure
// is the union's one error.
type Ledger struct {
	// MaxLag bounds stored − trained env steps (0: no bound; use it only
	// when one goroutine pulls both sub-flows in turn).
	MaxLag int64

	mu              sync.Mutex
	changed         chan struct{}
	stored, trained int64
	ended           bool // the store sub-flow has ended
	failed          bool // the replay sub-flow has ended with an error
	// A checkpoint of a plan whose sub-flows run side by side (ApeXPlan:
	// registerHold) holds the store sub-flow between items: hold asks
	// for it, held says it is there, released counts the releases (the
	// store goes on after the one it waits for, even if the next
	// checkpoint asks again at once), stop ends it instead.
	hold, held, stop bool
	released         int
}

// wait parks until ok() holds (checked under the lock) or ctx ends.
func (l *Ledger) wait(r *Run, ok func() bool) error {
	l.mu.Lock()
	for !ok() {
		if l.changed == nil {
			l.changed = make(chan struct{})
		}
		ch := l.changed
		l.mu.Unlock()
		select {
		case <-ch:
		case <-r.Ctx.Done():
			return r.Ctx.Err()
		}
		l.mu.Lock()
	}
	l.mu.Unlock()
	return nil
}

func (l *Ledger) isFailed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failed
}

// update changes the counts under the lock and wakes the waiters.
func (l *Ledger) update(f func()) {
	l.mu.Lock()
	f()
	if l.changed != nil {
		close(l.changed)
		l.changed = nil
	}
	l.mu.Unlock()
}

// StoreToReplay adds each item's transitions to rb and counts its steps in
// the ledger; the stream's end is recorded there too, so the replay
// sub-flow can finish the updates due and end. rb must be safe for the
// goroutine that pulls this stream (a ForkReplay's fork under UnionAsync).
func StoreToReplay(r *Run, rb algo.Replay, l *Ledger, it Iter[Experience]) Iter[Report] {
	return func(yield func(Report, error) bool) {
		defer l.update(func() { l.ended = true })
		for x, err := range it {
			if err == nil && l.MaxLag > 0 {
				err = l.wait(r, func() bool { return l.stored-l.trained <= l.MaxLag || l.failed })
			}
			if err == nil && l.isFailed() {
				return // the replay sub-flow reports its own error
			}
			if err == nil {
				err = rb.Add(x.Transitions)
			}
			if err != nil {
				yield(Report{}, err)
				return
			}
			l.update(func() { l.stored += x.Report.Steps })
			if !yield(x.Report, nil) || !l.rest(r, yield) {
				return
			}
		}
	}
}

// rest holds the store sub-flow between two items while a checkpoint
// asks for it (registerHold): still inside the gather's item, with no
// transition being stored. It says so with an empty report, after which
// the consumer checks again whether the checkpoint can be taken, and
// waits for the release; false: the sub-flow ends (the run was
// interrupted, or its context ended).
func (l *Ledger) rest(r *Run, yield func(Report, error) bool) bool {
	l.mu.Lock()
	hold, gen := l.hold, l.released
	l.held = hold
	l.mu.Unlock()
	if !hold {
		return true
	}
	if !yield(Report{}, nil) {
		return false
	}
	if err := l.wait(r, func() bool { return l.released != gen }); err != nil {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.stop
}

// registerHold makes the ledger hold the store sub-flow for r's
// checkpoints: ready once it is held between items (or has ended) and
// every stored step's updates have run, so that neither sub-flow is
// inside an item. The replay sub-flow, with nothing new stored, waits
// meanwhile.
func (l *Ledger) registerHold(r *Run) {
	r.register(part{
		save:    func(context.Context, map[string][]byte) error { return nil },
		restore: func(*trainstate.State) error { return nil },
		ready: func() bool {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.hold = true
			return l.held || l.ended
		},
		release: func(stop bool) {
			l.update(func() {
				l.hold, l.held, l.stop = false, false, stop
				l.released++
			})
		},
	})
}

// Replay is the replay sub-flow: each item runs the learner's updates due
// for the env steps stored since the last item (TransitionLearner.Learn:
// minibatches drawn from rb, priorities fed back, target network updated
// on its schedule) and then sends the new weights to the workers
// (ReplayWorkers.UpdateWeights: to each, or for SyncEvery). It waits
// while no new steps are stored, and ends once the store sub-flow has
// ended and every stored step's updates have run.
func Replay(r *Run, rb algo.Replay, learner algo.TransitionLearner, ws *ReplayWorkers, l *Ledger) Iter[Report] {
	l.register(r)
	return func(yield func(Report, error) bool) {
		for {
			if err := l.wait(r, func() bool { return l.stored > l.trained || l.ended }); err != nil {
				yield(Report{}, err)
				return
			}
			l.mu.Lock()
			prev, step, ended := l.trained, l.stored, l.ended
			l.mu.Unlock()
			if step == prev && ended {
				return
			}
			r.learning.Lock()
			stats, err := learner.Learn(r.Ctx, rb, prev, step)
			r.learning.Unlock()
			if err != nil {
				l.update(func() { l.failed = true })
				yield(Report{}, err)
				return
			}
			if len(stats) > 0 {
				// Before the ledger moves: a worker whose item waited
				// for these updates sees their weights when it is due.
				ws.UpdateWeights(learner.Weights())
			}
			l.update(func() { l.trained = step })
			if !yield(Report{Stats: append([]algo.Stat(nil), stats...)}, nil) {
				return
			}
		}
	}
}

// Fork returns a fork of rb for another goroutine (algo.ForkReplay), or an
// error if rb's workspaces cannot be shared.
func Fork(rb algo.Replay) (algo.Replay, error) {
	f, ok := rb.(algo.ForkReplay)
	if !ok {
		return nil, fmt.Errorf("%w: the replay %T cannot be shared between goroutines", ErrConfig, rb)
	}
	return f.Fork(), nil
}
