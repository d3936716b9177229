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
	// ready, when set, says whether the part's state is whole after this
	// report (ReplayPlan's ledger: not between a store item and the
	// updates due for it); a checkpoint then waits for the report after
	// which every part is ready.
	ready func() bool
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
	for _, p := range r.parts {
		if err := p.restore(s); err != nil {
			return fmt.Errorf("flow: resume from step %d: %w", s.Header.Step, err)
		}
	}
	return nil
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
	for _, p := range r.parts {
		if p.ready != nil && !p.ready() {
			return nil
		}
	}
	if err := r.outer.Err(); err != nil {
		if !errors.Is(context.Cause(r.outer), algo.ErrDiverged) {
			if serr := r.checkpoint(); serr != nil && r.ck.Err() == nil {
				return serr
			}
		}
		return err
	}
	if r.ck.Due(r.steps) && r.steps < r.total.Load() {
		return r.checkpoint()
	}
	return nil
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
			if _, err := env.MarshalChain(e); err != nil {
				r.noCheckpoints(err.Error())
				return
			}
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

func (w *worker) state() ([]byte, error) {
	st := workerState{Claimed: w.claimed, Steps: w.steps, Obs: w.loop.Observations()}
	if sp, ok := w.policy.(algo.StatefulPolicy); ok && sp.StateDim() > 0 {
		st.State = sp.StateTo(nil, len(w.envs))
	}
	var err error
	if st.Weights, err = encodeWeights(w.version); err != nil {
		return nil, err
	}
	for j, e := range w.envs {
		eb, err := env.MarshalChain(e)
		if err != nil {
			return nil, err
		}
		sb, err := w.srcs[j].MarshalBinary()
		if err != nil {
			return nil, err
		}
		st.Envs, st.Samplers = append(st.Envs, eb), append(st.Samplers, sb)
	}
	return gobBytes(st)
}

func (w *worker) restore(st workerState) error {
	if len(st.Envs) != len(w.envs) || len(st.Samplers) != len(w.envs) || len(st.Obs) != len(w.loop.Observations()) {
		return fmt.Errorf("%w: worker %d saved %d envs and %d observation values, it has %d and %d",
			trainstate.ErrCorrupt, w.id, len(st.Envs), len(st.Obs), len(w.envs), len(w.loop.Observations()))
	}
	for j, e := range w.envs {
		if err := env.UnmarshalChain(e, st.Envs[j]); err != nil {
			return err
		}
		if err := w.srcs[j].UnmarshalBinary(st.Samplers[j]); err != nil {
			return err
		}
	}
	sd := 0
	sp, ok := w.policy.(algo.StatefulPolicy)
	if ok {
		sd = sp.StateDim()
	}
	if len(st.State) != len(w.envs)*sd {
		return fmt.Errorf("%w: worker %d saved %d state values, its policy keeps %d per env for %d envs",
			trainstate.ErrCorrupt, w.id, len(st.State), sd, len(w.envs))
	}
	if sd > 0 {
		sp.SetState(st.State, len(w.envs))
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

// replayWorkerState is a slot replay worker's state between items
// (OffPolicySlotWorkers), each slice in slot order.
type replayWorkerState struct {
	Made, Since int64
	Weights     []byte
	Obs         []float32
	Envs        [][]byte // env.MarshalVector's one env
	Streams     [][]byte // the sampler's stream
	Samplers    [][]byte // the sampler's own state (OU noise), if it has any
	Assemblers  [][]byte
}

// register saves and restores each of ws's slot workers with the run.
func (ws *ReplayWorkers) register(set int) {
	r := ws.r
	if !r.localWorkers() {
		return
	}
	for k, w := range ws.ws {
		if !r.savesPolicy(w.policy) {
			return
		}
		for j, v := range w.vecs {
			if _, err := env.MarshalVector(v); err != nil {
				r.noCheckpoints(err.Error())
				return
			}
			if _, ok := w.assemblers[j].(interface {
				encoding.BinaryMarshaler
				encoding.BinaryUnmarshaler
			}); !ok {
				r.noCheckpoints(fmt.Sprintf("the assembler %T cannot save its state", w.assemblers[j]))
				return
			}
		}
		r.register(workerPart(fmt.Sprintf("%s/%d/%d", secWorker, set, k), ws.actors[k], w))
	}
}

func (w *replayWorker) state() ([]byte, error) {
	st := replayWorkerState{Made: w.made, Since: w.since, Obs: w.obs}
	var err error
	if st.Weights, err = encodeWeights(w.held); err != nil {
		return nil, err
	}
	for j, v := range w.vecs {
		ebs, err := env.MarshalVector(v)
		if err != nil {
			return nil, err
		}
		sb, err := w.srcs[j].MarshalBinary()
		if err != nil {
			return nil, err
		}
		var own []byte
		if m, ok := w.samplers[j].(encoding.BinaryMarshaler); ok {
			if own, err = m.MarshalBinary(); err != nil {
				return nil, err
			}
		}
		ab, err := w.assemblers[j].(encoding.BinaryMarshaler).MarshalBinary()
		if err != nil {
			return nil, err
		}
		st.Envs, st.Streams = append(st.Envs, ebs[0]), append(st.Streams, sb)
		st.Samplers, st.Assemblers = append(st.Samplers, own), append(st.Assemblers, ab)
	}
	return gobBytes(st)
}

func (w *replayWorker) restore(st replayWorkerState) error {
	n := len(w.vecs)
	if len(st.Envs) != n || len(st.Streams) != n || len(st.Samplers) != n || len(st.Assemblers) != n || len(st.Obs) != len(w.obs) || st.Made < 0 || st.Since < 0 {
		return fmt.Errorf("%w: replay worker %d saved %d envs and %d observation values, it has %d and %d",
			trainstate.ErrCorrupt, w.id, len(st.Envs), len(st.Obs), n, len(w.obs))
	}
	for j, v := range w.vecs {
		if err := env.UnmarshalVector(v, func(int) ([]byte, error) { return st.Envs[j], nil }); err != nil {
			return err
		}
		if err := w.srcs[j].UnmarshalBinary(st.Streams[j]); err != nil {
			return err
		}
		if u, ok := w.samplers[j].(encoding.BinaryUnmarshaler); ok {
			if err := u.UnmarshalBinary(st.Samplers[j]); err != nil {
				return err
			}
		}
		if err := w.assemblers[j].(encoding.BinaryUnmarshaler).UnmarshalBinary(st.Assemblers[j]); err != nil {
			return err
		}
	}
	copy(w.obs, st.Obs)
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
