package flow

import (
	"bytes"
	"context"
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

// registerWorkers saves and restores each of ws's workers with the run.
func (ws *Workers) register(set int) {
	r := ws.r
	if r.remote != nil {
		r.noCheckpoints("workers served over a transport keep their state elsewhere")
		return
	}
	for k, w := range ws.ws {
		if _, ok := w.policy.(interface{ Params() []*nn.Param }); !ok {
			r.noCheckpoints(fmt.Sprintf("the policy %T cannot name its parameters", w.policy))
			return
		}
		for _, e := range w.envs {
			if _, err := env.MarshalChain(e); err != nil {
				r.noCheckpoints(err.Error())
				return
			}
		}
		name := fmt.Sprintf("%s/%d/%d", secWorker, set, k)
		a := ws.actors[k]
		r.register(part{
			save: func(ctx context.Context, out map[string][]byte) error {
				// On the actor, after every item and message sent to it.
				return a.Call(ctx, func() error {
					b, err := w.state()
					out[name] = b
					return err
				})
			},
			restore: func(s *trainstate.State) error {
				var st workerState
				if err := gobSection(s, name, &st); err != nil {
					return err
				}
				return w.restore(st)
			},
		})
	}
}

func (w *worker) state() ([]byte, error) {
	st := workerState{Claimed: w.claimed, Steps: w.steps, Obs: w.loop.Observations()}
	if sp, ok := w.policy.(algo.StatefulPolicy); ok && sp.StateDim() > 0 {
		st.State = sp.StateTo(nil, len(w.envs))
	}
	if w.version != nil {
		b, err := w.version.Encode()
		if err != nil {
			return nil, err
		}
		st.Weights = b
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
	if st.Weights != nil {
		v, err := weights.Decode(st.Weights, w.policy.(interface{ Params() []*nn.Param }).Params())
		if err != nil {
			return err
		}
		w.setWeights(v)
		if w.err != nil {
			return w.err
		}
	}
	return nil
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
