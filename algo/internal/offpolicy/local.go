package offpolicy

import (
	"context"
	"encoding"
	"errors"
	"fmt"
	"math/rand/v2"

	"herd/algo"
	"herd/env"
	"herd/internal/rng"
	"herd/internal/trainstate"
)

// Sections of the local loop's checkpoint (algo.Checkpoints).
const (
	secLearner   = "learner"     // LearnerState: networks, targets, optimizers, streams, counters
	secReplay    = "replay"      // Replay.MarshalBinary: transitions, priorities, sum tree, FIFO position
	secExplore   = "rng/explore" // the sampler's stream (PCG)
	secSampler   = "sampler"     // the sampler's own state (OU noise), when it has one
	secAssembler = "assembler"   // every env's pending n-step steps
	secLoop      = "loop"        // the global step and the observations acted on next
	secEnv       = "env/"        // + env index: env.MarshalChain
)

// Local is the local executor of the off-policy algorithms: one env
// worker and one learner taking turns on the caller's goroutine, with the
// pieces a checkpoint saves.
type Local struct {
	// Name prefixes errors ("dqn").
	Name string
	// Envs are the worker's envs (env.SyncVector, whose envs a
	// checkpoint saves one by one).
	Envs   env.Vector
	Worker *EnvWorker
	Replay *Replay
	// Learner is the run's learner; a StateLearner for checkpoints.
	Learner algo.TransitionLearner
	// Explore is the source of the sampler's random stream.
	Explore *rand.PCG
	// Sampler is saved when it has state of its own beyond its stream
	// (encoding.BinaryMarshaler: NoisySampler's OU noise).
	Sampler   algo.Sampler
	Assembler *Assembler

	// restart: the envs cannot save their state, so checkpoints leave
	// them and the assembler's pending steps out, and a resumed run
	// starts their episodes anew.
	restart bool
}

// LocalPieces are what an off-policy algorithm's own Train composes
// (TrainLocal), built for the run's spaces: its pieces' constructors (as
// NewLocalPieces adapts them), the network of the learner the env worker
// acts with, and Prioritizer, when not nil, the worker's actor priorities
// (DQN's initial_priorities: actor).
type LocalPieces struct {
	learner     func() (localLearner, error)
	replay      func() (*Replay, error)
	sampler     func(numEnvs int, r *rand.Rand) (algo.Sampler, error)
	assembler   func(numEnvs int) (*Assembler, error)
	acting      func(localLearner) algo.PolicyNet
	Prioritizer algo.Prioritizer
}

// localLearner is a learner that hands out the model it trains.
type localLearner interface {
	algo.TransitionLearner
	algo.Modeler
}

// NewLocalPieces wraps an algorithm's typed constructors as LocalPieces;
// acting returns the learner's network the env worker acts with.
func NewLocalPieces[S algo.Sampler, L localLearner](
	learner func() (L, error),
	replay func() (*Replay, error),
	sampler func(numEnvs int, r *rand.Rand) (S, error),
	assembler func(numEnvs int) (*Assembler, error),
	acting func(L) algo.PolicyNet) *LocalPieces {
	return &LocalPieces{
		learner:   func() (localLearner, error) { return nilOr[localLearner](learner()) },
		replay:    replay,
		sampler:   func(n int, r *rand.Rand) (algo.Sampler, error) { return nilOr[algo.Sampler](sampler(n, r)) },
		assembler: assembler,
		acting:    func(l localLearner) algo.PolicyNet { return acting(l.(L)) },
	}
}

// TrainLocal is an off-policy algorithm's own Train, the local executor:
// the shortest composition of its pieces. It makes numEnvs envs through
// rt, builds the pieces for their spaces, and runs Local's loop with one
// env worker that acts with the learner's live network (same goroutine,
// no copy of the weights) and samples from the stream (name+"/explore",
// 0), which a checkpoint saves. It returns the learner's model.
func TrainLocal(ctx context.Context, rt *algo.Runtime, name string, numEnvs int, build func(algo.Spaces) (*LocalPieces, error)) (algo.Model, error) {
	h := rt.Header
	envs, err := rt.MakeEnvs(numEnvs)
	if err != nil {
		return nil, err
	}
	defer envs.Close()
	p, err := build(algo.SpacesOf(envs))
	if err != nil {
		return nil, err
	}
	learner, err := p.learner()
	if err != nil {
		return nil, err
	}
	defer learner.Close()
	rb, err := p.replay()
	if err != nil {
		return nil, err
	}
	explore := rng.Source(h.Seed, name+"/explore", 0)
	sampler, err := p.sampler(numEnvs, rand.New(explore))
	if err != nil {
		return nil, err
	}
	assembler, err := p.assembler(numEnvs)
	if err != nil {
		return nil, err
	}
	worker, err := NewEnvWorker(envs, p.acting(learner), sampler, assembler)
	if err != nil {
		return nil, err
	}
	worker.Prioritizer = p.Prioritizer
	model := learner.Model()
	rt.Track(model) // divergence guard (algo.TrainRun)
	if err := worker.Reset(h.Seed); err != nil {
		return nil, err
	}
	lc := Local{Name: name, Envs: envs, Worker: worker, Replay: rb, Learner: learner,
		Explore: explore, Sampler: sampler, Assembler: assembler}
	return model, lc.Run(ctx, rt, h.Steps)
}

// Run is the local executor's loop, the same for every off-policy
// algorithm: until `steps` env steps have passed, act and step the envs
// (EnvWorker.Step), store the assembled transitions in the replay, run
// the updates due for the steps just taken (TransitionLearner.Learn holds
// the replay ratio), and log.
//
// With rt.Checkpoints it first restores the state a resumed run continues
// from, then saves its whole state every checkpoint_every env steps, when
// ctx ends and at the end, each time between two vector steps; a vector
// step's updates then always finish before ctx's end is seen, so the
// interrupted run's checkpoint is at the step where it stopped. Without
// checkpoints it stops at a step boundary, or inside the updates, when
// ctx ends. It returns ctx's error then; name prefixes the other errors.
func (lc *Local) Run(ctx context.Context, rt *algo.Runtime, steps int64) error {
	w, name := lc.Worker, lc.Name
	ck := rt.Checkpoints
	if ck != nil {
		if err := lc.snapshotable(ck); err != nil {
			if ck.Restored() != nil {
				return fmt.Errorf("%s: cannot resume: %w", name, err)
			}
			ck.Disable(err.Error())
			ck = nil
		}
	}
	if ck != nil && ck.Restored() != nil {
		if err := lc.restore(ck.Restored()); err != nil {
			return fmt.Errorf("%s: resume from step %d: %w", name, ck.Restored().Header.Step, err)
		}
		if lc.restart {
			if err := w.Loop.Reset(algo.RestartSeed(rt.Header.Seed, name+"/env", w.Steps)); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			ck.RestartEnvs(lc.Envs.NumEnvs())
		}
	}
	save := func() error {
		if ck == nil {
			return nil
		}
		sections, err := lc.save()
		if err == nil {
			err = ck.Save(w.Steps, sections)
		}
		if err != nil {
			return fmt.Errorf("%s: checkpoint at step %d not saved: %w", name, w.Steps, err)
		}
		return nil
	}
	learnCtx := ctx
	if ck != nil {
		learnCtx = context.WithoutCancel(ctx)
	}
	for w.Steps < steps {
		if err := ctx.Err(); err != nil {
			// A diverged run (the guard's cancel) keeps no checkpoint of
			// its non-finite parameters; a failed write is the caller's
			// to report (Checkpoints.Err).
			if !errors.Is(context.Cause(ctx), algo.ErrDiverged) {
				if serr := save(); serr != nil && ck.Err() == nil {
					return serr
				}
			}
			return err
		}
		prev := w.Steps
		if err := w.Step(rt.Log); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if err := lc.Replay.Add(&w.Transitions); err != nil {
			return fmt.Errorf("%s: store: %w", name, err)
		}
		stats, err := lc.Learner.Learn(learnCtx, lc.Replay, prev, w.Steps)
		if err != nil {
			return err
		}
		LogStats(rt.Log, stats)
		rt.Log.Step(w.Steps)
		if ck != nil && ck.Due(w.Steps) && w.Steps < steps {
			if err := save(); err != nil {
				return err
			}
		}
	}
	return save()
}

// snapshotable reports why the loop's state cannot be saved, or nil; envs
// that cannot save theirs are left out of ck's checkpoints (restart).
func (lc *Local) snapshotable(ck *algo.Checkpoints) error {
	sl, ok := lc.Learner.(StateLearner)
	if !ok {
		return fmt.Errorf("learner %T cannot save its state", lc.Learner)
	}
	if _, err := MarshalLearner(sl.LearnerState()); err != nil {
		return err
	}
	if lc.Explore == nil {
		return errors.New("the sampler's stream is not known")
	}
	_, err := env.MarshalVector(lc.Envs)
	saveable, err := ck.EnvsSaveable(err)
	lc.restart = !saveable
	return err
}

// save returns the loop's state as checkpoint sections.
func (lc *Local) save() (map[string][]byte, error) {
	out := map[string][]byte{}
	if err := (learnerReplay{lc.Learner.(StateLearner), lc.Replay}).SaveLearner(out); err != nil {
		return nil, err
	}
	var err error
	if out[secExplore], err = lc.Explore.MarshalBinary(); err != nil {
		return nil, err
	}
	if m, ok := lc.Sampler.(encoding.BinaryMarshaler); ok {
		if out[secSampler], err = m.MarshalBinary(); err != nil {
			return nil, err
		}
	}
	var lb stateBuf
	lb.u64(uint64(lc.Worker.Steps))
	lb.f32s(lc.Worker.Loop.Obs)
	out[secLoop] = lb.b
	if lc.restart {
		return out, nil
	}
	if out[secAssembler], err = lc.Assembler.MarshalBinary(); err != nil {
		return nil, err
	}
	ebs, err := env.MarshalVector(lc.Envs)
	if err != nil {
		return nil, err
	}
	for i, eb := range ebs {
		out[fmt.Sprintf("%s%d", secEnv, i)] = eb
	}
	return out, nil
}

// learnerReplay is the checkpoint of a learner and its replay: the
// sections secLearner and secReplay, the same in the local loop's
// checkpoint and the dist learner's (algo.OffPolicy.Checkpoint). With rb
// nil it is the learner's section alone.
type learnerReplay struct {
	l  StateLearner
	rb *Replay
}

// Checkpoint is algo.OffPolicy.Checkpoint for learners and replays built
// by this package; rb nil saves the learner alone.
func Checkpoint(l algo.TransitionLearner, rb algo.Replay) (algo.LearnerCheckpoint, error) {
	sl, ok := l.(StateLearner)
	if !ok {
		return nil, fmt.Errorf("learner %T cannot save its state", l)
	}
	var r *Replay
	if rb != nil {
		if r, ok = rb.(*Replay); !ok {
			return nil, fmt.Errorf("replay %T cannot save its state", rb)
		}
	}
	if _, err := MarshalLearner(sl.LearnerState()); err != nil {
		return nil, err
	}
	return learnerReplay{sl, r}, nil
}

func (c learnerReplay) SaveLearner(out map[string][]byte) error {
	var err error
	if out[secLearner], err = MarshalLearner(c.l.LearnerState()); err != nil || c.rb == nil {
		return err
	}
	out[secReplay], err = c.rb.MarshalBinary()
	return err
}

func (c learnerReplay) RestoreLearner(s *trainstate.State) error {
	names := []string{secLearner, secReplay}
	if c.rb == nil {
		names = names[:1]
	}
	for _, name := range names {
		if _, err := s.Section(name); err != nil {
			return err
		}
	}
	if err := UnmarshalLearner(c.l.LearnerState(), s.Sections[secLearner]); err != nil || c.rb == nil {
		return err
	}
	return c.rb.UnmarshalBinary(s.Sections[secReplay])
}

// restore loads a checkpoint's state into the freshly built loop; with
// restart, the envs and the assembler stay as built (Run resets the envs).
func (lc *Local) restore(s *trainstate.State) error {
	if err := (learnerReplay{lc.Learner.(StateLearner), lc.Replay}).RestoreLearner(s); err != nil {
		return err
	}
	if err := s.Get(secExplore, lc.Explore); err != nil {
		return err
	}
	if u, ok := lc.Sampler.(encoding.BinaryUnmarshaler); ok {
		if err := s.Get(secSampler, u); err != nil {
			return err
		}
	}
	b, err := s.Section(secLoop)
	if err != nil {
		return err
	}
	r := stateBuf{b: b}
	step := int64(r.getU64())
	r.getF32s(lc.Worker.Loop.Obs)
	if err := r.done("loop"); err != nil {
		return err
	}
	if step != s.Header.Step {
		return fmt.Errorf("%w: the loop is at step %d, the header says %d", trainstate.ErrCorrupt, step, s.Header.Step)
	}
	lc.Worker.Steps = step
	if lc.restart {
		return nil
	}
	if err := s.Get(secAssembler, lc.Assembler); err != nil {
		return err
	}
	if err := env.UnmarshalVector(lc.Envs, func(i int) ([]byte, error) { return s.Section(fmt.Sprintf("%s%d", secEnv, i)) }); err != nil {
		return err
	}
	if _, ok := s.Sections[fmt.Sprintf("%s%d", secEnv, lc.Envs.NumEnvs())]; ok {
		return errors.New("the checkpoint holds more envs than num_envs")
	}
	return nil
}
