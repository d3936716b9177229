package flow

import (
	"bytes"
	"context"
	"encoding"
	"encoding/gob"
	"errors"
	"fmt"

	"herd/algo"
	"herd/env"
	"herd/internal/trainstate"
	"herd/nn"
	"herd/rollout"
	"herd/weights"
)

// A plan's checkpoint (algo.Checkpoints) is the state of every part that
// registered with the Run — the learner, the worker sets, the gathers and
// the Run's own counters — taken after a report, on the consumer's
// goroutine: the gathers wait for the items they requested (so no env
// step is in flight) and save those not yet yielded, the workers save
// their envs, samplers and weights on their actors after every message
// sent to them. A resumed plan starts from those states as the
// uninterrupted plan went on from them, so a plan whose order does not
// depend on timing (SyncPlan, and A3C's and IMPALA's at the least lag
// bound) ends with the same bits.

// Sections of a plan's checkpoint, beside the learner's own.
const (
	secRun    = "flow/run"    // reported steps, the largest lag, the budget left
	secWorker = "flow/worker" // + "/set/k": a rollout worker
	secGather = "flow/gather" // + "/i": a gather's requests and held items
)

// part is one registered piece of a plan's state.
type part struct {
	save    func(ctx context.Context, out map[string][]byte) error
	restore func(s *trainstate.State) error
	// ready, when set, is asked after each report while a checkpoint is
	// wanted, and says whether the part's state is whole (ReplayPlan's
	// ledger: not between a store item and the updates due for it); a
	// checkpoint then waits for the report after which every part is
	// ready. Asking may tell the part to come to rest (ApeXPlan's store
	// sub-flow, held between items), which then sends a report once it is.
	ready func() bool
	// release, when set, is called once the wanted checkpoint is taken:
	// a part that came to rest for it goes on, or, with stop (the run
	// was interrupted), ends.
	release func(stop bool)
}

// register adds a part to the run's checkpoints.
func (r *Run) register(p part) { r.parts = append(r.parts, p) }

// noCheckpoints records why the plan's state cannot be saved whole; the
// run then writes no checkpoints (and refuses to resume).
func (r *Run) noCheckpoints(why string) {
	if r.noCk == "" {
		r.noCk = why
	}
}

// setUpCheckpoints turns checkpoints off for a plan that cannot save its
// state, and restores a resumed run's parts, after the plan is built and
// before it is pulled.
func (r *Run) setUpCheckpoints() error {
	ck := r.rt.Checkpoints
	if ck == nil {
		return nil
	}
	if r.noCk != "" {
		if ck.Restored() != nil {
			return fmt.Errorf("%w: cannot resume: %s", ErrConfig, r.noCk)
		}
		ck.Disable(r.noCk)
		return nil
	}
	r.ck = ck
	r.register(part{save: r.saveRun, restore: r.restoreRun})
	s := ck.Restored()
	if s == nil {
		return nil
	}
	r.resumeStep = s.Header.Step
	for _, p := range r.parts {
		if err := p.restore(s); err != nil {
			return fmt.Errorf("flow: resume from step %d: %w", s.Header.Step, err)
		}
	}
	if r.restarted > 0 {
		ck.RestartEnvs(r.restarted)
	}
	return nil
}

// envsSaved sorts out err, what saving a worker's envs gave
// (env.MarshalChain, env.MarshalVector), as the local executor does
// (algo.Checkpoints.EnvsSaveable): nil, their state goes into the
// checkpoints (saved); env.ErrNoSnapshot, the checkpoints hold everything
// else and the envs start new episodes on resume (restartEnvs); any other
// error turns the run's checkpoints off (ok false).
func (r *Run) envsSaved(err error) (saved, ok bool) {
	if err == nil {
		return true, true
	}
	if ck := r.rt.Checkpoints; ck != nil && errors.Is(err, env.ErrNoSnapshot) {
		if _, err := ck.EnvsSaveable(err); err == nil {
			return false, true
		}
	}
	r.noCheckpoints(err.Error())
	return false, false
}

// restartSeed is the reset seed, on resume, of the envs of role (a slot,
// an Ape-X worker) whose state the checkpoint does not hold; they are
// counted in summary.json's envs_restarted.
func (r *Run) restartSeed(role string, envs int) int64 {
	r.restarted += envs
	return algo.RestartSeed(r.Header.Seed, role, r.resumeStep)
}

// checkpoint saves every part's state at the run's reported step.
func (r *Run) checkpoint() error {
	out := map[string][]byte{}
	for _, p := range r.parts {
		if err := p.save(r.Ctx, out); err != nil {
			return fmt.Errorf("flow: checkpoint at step %d not saved: %w", r.steps, err)
		}
	}
	if err := r.ck.Save(r.steps, out); err != nil {
		return fmt.Errorf("flow: checkpoint at step %d not saved: %w", r.steps, err)
	}
	return nil
}

// afterReport takes the checkpoint due after a report, and on the
// caller's cancellation the checkpoint of the interruption (none for a
// diverged run), returning the cancellation's error.
func (r *Run) afterReport() error {
	if r.ck == nil {
		return nil
	}
	err := r.outer.Err()
	// Once wanted, a checkpoint stays wanted until it is taken: parts
	// asked to come to rest for it wait for their release.
	r.wanted = r.wanted || err != nil || r.ck.Due(r.steps) && r.steps < r.total.Load()
	if !r.wanted {
		return nil
	}
	ready := true
	for _, p := range r.parts {
		// Every part is asked, so each comes to rest at once.
		if p.ready != nil && !p.ready() {
			ready = false
		}
	}
	if !ready {
		return nil
	}
	r.wanted = false
	if err != nil {
		if !errors.Is(context.Cause(r.outer), algo.ErrDiverged) {
			if serr := r.checkpoint(); serr != nil && r.ck.Err() == nil {
				r.release(true)
				return serr
			}
		}
		r.release(true)
		return err
	}
	serr := r.checkpoint()
	r.release(serr != nil)
	return serr
}

// release lets the parts that came to rest for a checkpoint go on (or,
// with stop, end).
func (r *Run) release(stop bool) {
	for _, p := range r.parts {
		if p.release != nil {
			p.release(stop)
		}
	}
}

type runState struct {
	Steps   int64
	LagMax  float64
	Claimed int64 // env steps the workers claimed (made, or held by a gather)
}

func (r *Run) saveRun(_ context.Context, out map[string][]byte) error {
	b, err := gobBytes(runState{Steps: r.steps, LagMax: r.lagMax, Claimed: r.total.Load() - r.budget.Load()})
	out[secRun] = b
	return err
}

func (r *Run) restoreRun(s *trainstate.State) error {
	var st runState
	if err := gobSection(s, secRun, &st); err != nil {
		return err
	}
	if st.Steps != s.Header.Step {
		return fmt.Errorf("%w: the plan is at step %d, the header says %d", trainstate.ErrCorrupt, st.Steps, s.Header.Step)
	}
	// A larger budget on resume adds its steps to what was left.
	left := r.total.Load() - st.Claimed
	if left < 0 {
		return fmt.Errorf("%w: the checkpoint's workers claimed %d env steps, past the run's %d", ErrConfig, st.Claimed, r.total.Load())
	}
	r.steps, r.lagMax = st.Steps, st.LagMax
	r.budget.Store(left)
	return nil
}

// registerLearner saves and restores the plan's learner with it.
func (r *Run) registerLearner(l algo.SegmentLearner) {
	lc, ok := l.(algo.LearnerCheckpoint)
	if !ok {
		r.noCheckpoints(fmt.Sprintf("the learner %T cannot save its state", l))
		return
	}
	r.registerCheckpoint(lc)
}

// registerCheckpoint saves and restores lc (a learner, with its replay
// for an off-policy one) with the run.
func (r *Run) registerCheckpoint(lc algo.LearnerCheckpoint) {
	r.register(part{
		save:    func(_ context.Context, out map[string][]byte) error { return lc.SaveLearner(out) },
		restore: lc.RestoreLearner,
	})
}

// workerState is a rollout worker's state between items.
type workerState struct {
	Claimed, Steps int64
	Weights        []byte // the version its policy holds (nil: the initial one)
	Obs            []float32
	Envs           [][]byte // env.MarshalChain per slot
	Samplers       [][]byte // each slot's sampler stream
	// State is a recurrent policy's state of each env (rows of StateDim,
	// slot order; nil: a stateless policy), which its next step reads.
	State []float32
}

// localWorkers reports whether the run's workers are in this process,
// where their state can be saved; if not, the run writes no checkpoints.
func (r *Run) localWorkers() bool {
	if r.remote != nil {
		r.noCheckpoints("workers served over a transport keep their state elsewhere")
		return false
	}
	return true
}

// savesPolicy reports whether a worker's policy names its parameters, which
// its checkpoint holds; if not, the run writes no checkpoints.
func (r *Run) savesPolicy(policy any) bool {
	if _, ok := policy.(interface{ Params() []*nn.Param }); !ok {
		r.noCheckpoints(fmt.Sprintf("the policy %T cannot name its parameters", policy))
		return false
	}
	return true
}

// register saves and restores each of ws's workers with the run.
func (ws *Workers) register(set int) {
	r := ws.r
	if !r.localWorkers() {
		return
	}
	for k, w := range ws.ws {
		if !r.savesPolicy(w.policy) {
			return
		}
		for _, e := range w.envs {
			_, err := env.MarshalChain(e)
			saved, ok := r.envsSaved(err)
			if !ok {
				return
			}
			w.restart = w.restart || !saved
		}
		r.register(workerPart(fmt.Sprintf("%s/%d/%d", secWorker, set, k), ws.actors[k], w))
	}
}

// workerPart saves worker w on its actor a, after every item and message
// sent to it, as gob section name, and restores it from there.
func workerPart[S any](name string, a *Actor, w interface {
	state() ([]byte, error)
	restore(S) error
}) part {
	return part{
		save: func(ctx context.Context, out map[string][]byte) error {
			return a.Call(ctx, func() error {
				b, err := w.state()
				out[name] = b
				return err
			})
		},
		restore: func(s *trainstate.State) error {
			var st S
			if err := gobSection(s, name, &st); err != nil {
				return err
			}
			return w.restore(st)
		},
	}
}

// state is the worker's state; with restart (envs that cannot save
// theirs) without the envs, the observations they gave and a recurrent
// policy's state of them.
func (w *worker) state() ([]byte, error) {
	st := workerState{Claimed: w.claimed, Steps: w.steps}
	if !w.restart {
		st.Obs = w.loop.Observations()
		if sp, ok := w.policy.(algo.StatefulPolicy); ok && sp.StateDim() > 0 {
			st.State = sp.StateTo(nil, len(w.envs))
		}
	}
	var err error
	if st.Weights, err = encodeWeights(w.version); err != nil {
		return nil, err
	}
	for j, e := range w.envs {
		if !w.restart {
			eb, err := env.MarshalChain(e)
			if err != nil {
				return nil, err
			}
			st.Envs = append(st.Envs, eb)
		}
		sb, err := w.srcs[j].MarshalBinary()
		if err != nil {
			return nil, err
		}
		st.Samplers = append(st.Samplers, sb)
	}
	return gobBytes(st)
}

func (w *worker) restore(st workerState) error {
	envs, obs := len(w.envs), len(w.loop.Observations())
	if w.restart {
		envs, obs = 0, 0
	}
	if len(st.Envs) != envs || len(st.Samplers) != len(w.envs) || len(st.Obs) != obs {
		return fmt.Errorf("%w: worker %d saved %d envs, %d sampler streams and %d observation values, it has %d, %d and %d",
			trainstate.ErrCorrupt, w.id, len(st.Envs), len(st.Samplers), len(st.Obs), envs, len(w.envs), obs)
	}
	for j := range w.envs {
		if !w.restart {
			if err := env.UnmarshalChain(w.envs[j], st.Envs[j]); err != nil {
				return err
			}
		}
		if err := w.srcs[j].UnmarshalBinary(st.Samplers[j]); err != nil {
			return err
		}
	}
	sd := 0
	sp, ok := w.policy.(algo.StatefulPolicy)
	if ok && !w.restart {
		sd = sp.StateDim()
	}
	if len(st.State) != len(w.envs)*sd {
		return fmt.Errorf("%w: worker %d saved %d state values, its policy keeps %d per env for %d envs",
			trainstate.ErrCorrupt, w.id, len(st.State), sd, len(w.envs))
	}
	if sd > 0 {
		sp.SetState(st.State, len(w.envs))
	}
	if w.restart {
		// New episodes, each slot's with a seed of its own for this
		// resumption; the recurrent state is still the initial one.
		st.Obs = make([]float32, 0, len(w.loop.Observations()))
		for j, e := range w.envs {
			slot := w.lo + j
			o, _, err := e.Reset(w.r.restartSeed(fmt.Sprintf("flow/env/%d", slot), 1))
			if err != nil {
				return fmt.Errorf("flow: reset env %d: %w", slot, err)
			}
			st.Obs = append(st.Obs, o...)
		}
	}
	w.loop.Start(st.Obs)
	w.claimed, w.steps = st.Claimed, st.Steps
	return restoreWeights(st.Weights, w.policy, w.setWeights, &w.err)
}

// encodeWeights is the weights version a worker's policy holds, as a
// checkpoint saves it (nil: the initial one).
func encodeWeights(v *weights.Version) ([]byte, error) {
	if v == nil {
		return nil, nil
	}
	return v.Encode()
}

// restoreWeights hands a worker's policy the version encodeWeights
// saved, through the worker's setWeights, whose failure it records in
// *failed.
func restoreWeights(b []byte, policy algo.PolicyNet, set func(*weights.Version), failed *error) error {
	if b == nil {
		return nil
	}
	v, err := weights.Decode(b, policy.(interface{ Params() []*nn.Param }).Params())
	if err != nil {
		return err
	}
	set(v)
	return *failed
}

// ledgerState is a Ledger's counts, equal when it is saved.
type ledgerState struct{ Stored, Trained int64 }

// register makes the ledger a part of r's checkpoints, ready only when
// every stored step's updates have run: a checkpoint comes after the
// replay sub-flow's report, never between a store item and its updates.
func (l *Ledger) register(r *Run) {
	const name = secRun + "/ledger"
	r.register(part{
		save: func(_ context.Context, out map[string][]byte) error {
			l.mu.Lock()
			st := ledgerState{l.stored, l.trained}
			l.mu.Unlock()
			b, err := gobBytes(st)
			out[name] = b
			return err
		},
		restore: func(s *trainstate.State) error {
			var st ledgerState
			if err := gobSection(s, name, &st); err != nil {
				return err
			}
			if st.Stored != st.Trained || st.Stored != s.Header.Step {
				return fmt.Errorf("%w: the ledger stored %d env steps and trained %d at step %d", trainstate.ErrCorrupt, st.Stored, st.Trained, s.Header.Step)
			}
			l.update(func() { l.stored, l.trained = st.Stored, st.Trained })
			return nil
		},
		ready: func() bool {
			l.mu.Lock()
			defer l.mu.Unlock()
			return l.stored == l.trained
		},
	})
}

// replayWorkerState is a replay worker's state between items, each
// slice in env order (a slot worker's slots; an Ape-X worker's one
// sampler and assembler over its envs). Envs, Obs and Assemblers are
// left out when the envs cannot save their state (restart).
type replayWorkerState struct {
	Made, Since int64
	Weights     []byte
	Obs         []float32
	Envs        [][]byte // env.MarshalVector's envs, vector after vector
	Streams     [][]byte // the sampler's stream
	Samplers    [][]byte // the sampler's own state (OU noise), if it has any
	Assemblers  [][]byte
}

// register saves and restores each of ws's workers with the run.
func (ws *ReplayWorkers) register(set int) {
	r := ws.r
	if !r.localWorkers() {
		return
	}
	for k, w := range ws.ws {
		if !r.savesPolicy(w.policy) {
			return
		}
		for _, v := range w.vectors() {
			_, err := env.MarshalVector(v)
			saved, ok := r.envsSaved(err)
			if !ok {
				return
			}
			w.restart = w.restart || !saved
		}
		for _, a := range w.assemblers {
			if _, ok := a.(interface {
				encoding.BinaryMarshaler
				encoding.BinaryUnmarshaler
			}); !ok && !w.restart {
				r.noCheckpoints(fmt.Sprintf("the assembler %T cannot save its state", a))
				return
			}
		}
		r.register(workerPart(fmt.Sprintf("%s/%d/%d", secWorker, set, k), ws.actors[k], w))
	}
}

// vectors are the worker's envs: a slot worker's one per slot, an Ape-X
// worker's one.
func (w *replayWorker) vectors() []env.Vector {
	if w.slots {
		return w.vecs
	}
	return []env.Vector{w.envs}
}

// loops are the env-step loops over vectors().
func (w *replayWorker) loops() []*rollout.Transitions {
	if w.slots {
		return w.slotLoops
	}
	return []*rollout.Transitions{w.loop}
}

func (w *replayWorker) state() ([]byte, error) {
	st := replayWorkerState{Made: w.made, Since: w.since}
	var err error
	if st.Weights, err = encodeWeights(w.held); err != nil {
		return nil, err
	}
	if !w.restart {
		st.Obs = w.obs
		for j, v := range w.vectors() {
			ebs, err := env.MarshalVector(v)
			if err != nil {
				return nil, err
			}
			ab, err := w.assemblers[j].(encoding.BinaryMarshaler).MarshalBinary()
			if err != nil {
				return nil, err
			}
			st.Envs, st.Assemblers = append(st.Envs, ebs...), append(st.Assemblers, ab)
		}
	}
	for j, src := range w.srcs {
		sb, err := src.MarshalBinary()
		if err != nil {
			return nil, err
		}
		var own []byte
		if m, ok := w.samplers[j].(encoding.BinaryMarshaler); ok {
			if own, err = m.MarshalBinary(); err != nil {
				return nil, err
			}
		}
		st.Streams, st.Samplers = append(st.Streams, sb), append(st.Samplers, own)
	}
	return gobBytes(st)
}

func (w *replayWorker) restore(st replayWorkerState) error {
	vecs, envs, obs := w.vectors(), 0, len(w.obs)
	for _, v := range vecs {
		envs += v.NumEnvs()
	}
	n := len(vecs)
	if w.restart {
		envs, obs, n = 0, 0, 0
	}
	if len(st.Envs) != envs || len(st.Assemblers) != n || len(st.Obs) != obs ||
		len(st.Streams) != len(w.srcs) || len(st.Samplers) != len(w.srcs) || st.Made < 0 || st.Since < 0 {
		return fmt.Errorf("%w: replay worker %d saved %d envs, %d sampler streams and %d observation values, it has %d, %d and %d",
			trainstate.ErrCorrupt, w.id, len(st.Envs), len(st.Streams), len(st.Obs), envs, len(w.srcs), obs)
	}
	for j, src := range w.srcs {
		if err := src.UnmarshalBinary(st.Streams[j]); err != nil {
			return err
		}
		if u, ok := w.samplers[j].(encoding.BinaryUnmarshaler); ok {
			if err := u.UnmarshalBinary(st.Samplers[j]); err != nil {
				return err
			}
		}
	}
	if w.restart {
		// New episodes, with seeds of their own for this resumption;
		// the fresh assemblers hold no steps of the dropped ones.
		for j, loop := range w.loops() {
			role := fmt.Sprintf("flow/apex/%d", w.id)
			if w.slots {
				role = fmt.Sprintf("flow/env/%d", w.lo+j)
			}
			if err := loop.Reset(w.r.restartSeed(role, loop.NumEnvs())); err != nil {
				return fmt.Errorf("flow: worker %d: %w", w.id, err)
			}
		}
	} else {
		off := 0
		for j, v := range vecs {
			if err := env.UnmarshalVector(v, func(i int) ([]byte, error) { return st.Envs[off+i], nil }); err != nil {
				return err
			}
			off += v.NumEnvs()
			if err := w.assemblers[j].(encoding.BinaryUnmarshaler).UnmarshalBinary(st.Assemblers[j]); err != nil {
				return err
			}
		}
		copy(w.obs, st.Obs)
	}
	w.made, w.since = st.Made, st.Since
	return restoreWeights(st.Weights, w.policy, w.setWeights, &w.err)
}

// gatherState is what a gather saves: the items requested and not yet
// yielded (waited for, so none is in flight) with the bookkeeping that
// orders them. Its meaning is the gather's own (gatherAsync's,
// GatherSyncAhead's).
type gatherState[T any] struct {
	Yielded, InFlight int
	Seq               int       // requests made
	Pending           [][]stamp // per shard: the stamps of requests made
	Ended             []bool
	Asked             int       // the shard to ask once the item being consumed is done (−1: none)
	Items             []held[T] // arrived, then waited for, in the order the gather reads them
	Done              bool      // the stream had ended
}

// held is an item a gather holds: its shard, when it was requested, and
// the item (End: the shard's ErrEnd).
type held[T any] struct {
	K, At int
	Seq   int
	V     T
	End   bool
}

// registerGather makes the gather's state a part of the run's checkpoints:
// save waits for its requests and returns its state, restore hands a
// restored one to the gather before it is pulled. Items must be
// gob-encodable (exported fields): a segment, A3C's gradients.
func registerGather[T any](p ParIter[T], save func(ctx context.Context) (gatherState[T], error), restore func(gatherState[T]) error) {
	r := p.r
	if r == nil {
		return
	}
	name := fmt.Sprintf("%s/%d", secGather, r.gathers)
	r.gathers++
	r.register(part{
		save: func(ctx context.Context, out map[string][]byte) error {
			st, err := save(ctx)
			if err != nil {
				return err
			}
			b, err := gobBytes(st)
			out[name] = b
			return err
		},
		restore: func(s *trainstate.State) error {
			var st gatherState[T]
			if err := gobSection(s, name, &st); err != nil {
				return err
			}
			return restore(st)
		},
	})
}

func gobBytes(v any) ([]byte, error) {
	var b bytes.Buffer
	if err := gob.NewEncoder(&b).Encode(v); err != nil {
		return nil, fmt.Errorf("flow: checkpoint: %w", err)
	}
	return b.Bytes(), nil
}

func gobSection(s *trainstate.State, name string, v any) error {
	b, err := s.Section(name)
	if err != nil {
		return err
	}
	if err := gob.NewDecoder(bytes.NewReader(b)).Decode(v); err != nil {
		return fmt.Errorf("%w: section %s: %v", trainstate.ErrCorrupt, name, err)
	}
	return nil
}
