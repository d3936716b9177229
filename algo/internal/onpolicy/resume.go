package onpolicy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"

	"herd/algo"
	"herd/env"
	"herd/internal/scratch"
	"herd/internal/trainstate"
	"herd/nn"
	"herd/rollout"
)

// Sections of the local loop's checkpoint (algo.Checkpoints).
const (
	secParams    = "agent/params"    // every parameter's values, in Agent.Params order
	secOptimizer = "agent/optimizer" // nn.StatefulOptimizer state
	secLearner   = "learner"         // Learn calls so far, and the algorithm's own (LearnerState)
	secSampler   = "rng/actor"       // the sampler's stream (PCG)
	secLoop      = "loop"            // iteration, global step, loop steps, next observations
	secEnv       = "env/"            // + env index: env.MarshalChain
	secBehind    = "learner/behind"  // the delayed gradient's θ_{n−1} (Learner.start), for executors with a lag
	secRecurrent = "policy/state"    // a recurrent policy's state of every env, the one its next step starts from
)

// LearnerState is implemented by an algorithm's learner that keeps state
// of its own across Learn calls beyond the Learner's (PPO: the minibatch
// stream and the index order it shuffles in place), for checkpoints.
type LearnerState interface {
	MarshalLearnerState() ([]byte, error)
	UnmarshalLearnerState(b []byte) error
}

// local is the local executor's loop state: what a checkpoint saves and a
// resumed run restores, bit for bit.
type local struct {
	learner   *Learner
	sl        algo.SegmentLearner
	policy    *Policy
	sampler   *rand.PCG
	worker    *rollout.Segments
	envs      env.Vector
	iteration int   // the last iteration done
	step      int64 // global env steps done
	// restart: the envs cannot save their state, so checkpoints leave
	// them (and a recurrent policy's state of them) out, and a resumed
	// run starts their episodes anew.
	restart bool
}

// snapshotable reports why the loop's state cannot be saved, or nil; envs
// that cannot save theirs are left out of ck's checkpoints (restart).
func (lc *local) snapshotable(ck *algo.Checkpoints) error {
	if _, ok := lc.learner.Opt.(nn.StatefulOptimizer); !ok {
		return fmt.Errorf("optimizer %T cannot save its state", lc.learner.Opt)
	}
	_, err := env.MarshalVector(lc.envs)
	saveable, err := ck.EnvsSaveable(err)
	lc.restart = !saveable
	return err
}

// save returns the loop's state as checkpoint sections.
func (lc *local) save() (map[string][]byte, error) {
	out := map[string][]byte{}
	if err := saveLearner(lc.learner, lc.sl, out, false); err != nil {
		return nil, err
	}
	var err error
	if out[secSampler], err = lc.sampler.MarshalBinary(); err != nil {
		return nil, err
	}
	loop := binary.LittleEndian.AppendUint64(nil, uint64(lc.iteration))
	loop = binary.LittleEndian.AppendUint64(loop, uint64(lc.step))
	loop = binary.LittleEndian.AppendUint64(loop, uint64(lc.worker.Steps))
	out[secLoop] = trainstate.AppendFloat32s(loop, lc.worker.Observations())
	if lc.restart {
		return out, nil
	}
	if lc.policy.StateDim() > 0 {
		out[secRecurrent] = trainstate.AppendFloat32s(nil, lc.policy.envState(lc.envs.NumEnvs()))
	}
	ebs, err := env.MarshalVector(lc.envs)
	if err != nil {
		return nil, err
	}
	for i, eb := range ebs {
		out[fmt.Sprintf("%s%d", secEnv, i)] = eb
	}
	return out, nil
}

// saveLearner puts the learner's sections into out: the parameters, the
// optimizer, the Learn count and the algorithm's own state (sl's
// LearnerState); with behind, also the delayed gradient's copy of the
// parameters of the previous Learn call (secBehind), which only an
// executor with a lag (HTS) reads.
func saveLearner(l *Learner, sl algo.SegmentLearner, out map[string][]byte, behind bool) error {
	params := l.Agent.Params()
	var b []byte
	for _, p := range params {
		b = trainstate.AppendFloat32s(b, p.Value)
	}
	out[secParams] = b
	opt, ok := l.Opt.(nn.StatefulOptimizer)
	if !ok {
		return fmt.Errorf("optimizer %T cannot save its state", l.Opt)
	}
	ob, err := opt.MarshalState(params)
	if err != nil {
		return err
	}
	out[secOptimizer] = ob
	lb := binary.LittleEndian.AppendUint64(nil, l.n)
	if ls, ok := sl.(LearnerState); ok {
		own, err := ls.MarshalLearnerState()
		if err != nil {
			return err
		}
		lb = append(lb, own...)
	}
	out[secLearner] = lb
	if behind && l.Delayed && l.start != nil {
		out[secBehind] = trainstate.AppendFloat32s(nil, l.start)
	}
	return nil
}

// restore loads a checkpoint's state into the freshly built loop; with
// restart, the envs and a recurrent policy's state of them stay as built
// (the caller resets the envs).
func (lc *local) restore(s *trainstate.State) error {
	if err := restoreLearner(lc.learner, lc.sl, s, false); err != nil {
		return err
	}
	b, err := s.Section(secSampler)
	if err != nil {
		return err
	}
	if err := lc.sampler.UnmarshalBinary(b); err != nil {
		return err
	}
	if b, err = s.Section(secLoop); err != nil {
		return err
	}
	obs := lc.worker.Observations()
	if len(b) != 24+4*len(obs) {
		return fmt.Errorf("%w: section %s has %d bytes for %d observation values", trainstate.ErrCorrupt, secLoop, len(b), len(obs))
	}
	lc.iteration = int(binary.LittleEndian.Uint64(b))
	lc.step = int64(binary.LittleEndian.Uint64(b[8:]))
	lc.worker.Steps = int64(binary.LittleEndian.Uint64(b[16:]))
	next := make([]float32, len(obs))
	trainstate.ReadFloat32s(next, b[24:])
	lc.worker.Start(next)
	if lc.step != s.Header.Step {
		return fmt.Errorf("%w: the loop is at step %d, the header says %d", trainstate.ErrCorrupt, lc.step, s.Header.Step)
	}
	if lc.restart {
		return nil
	}
	if lc.policy.StateDim() > 0 {
		if b, err = s.Section(secRecurrent); err != nil {
			return err
		}
		state := lc.policy.envState(lc.envs.NumEnvs())
		if len(b) != 4*len(state) {
			return fmt.Errorf("%w: section %s has %d bytes for %d state values", trainstate.ErrCorrupt, secRecurrent, len(b), len(state))
		}
		trainstate.ReadFloat32s(state, b)
	}
	if err := env.UnmarshalVector(lc.envs, func(i int) ([]byte, error) { return s.Section(fmt.Sprintf("%s%d", secEnv, i)) }); err != nil {
		return err
	}
	if _, err := s.Section(fmt.Sprintf("%s%d", secEnv, lc.envs.NumEnvs())); err == nil {
		return errors.New("the checkpoint holds more envs than num_envs")
	}
	return nil
}

// restoreLearner loads what saveLearner saved into the freshly built
// learner l (sl its algorithm's). With behind, a learner with Delayed
// that has learned needs the previous Learn call's parameters
// (secBehind).
func restoreLearner(l *Learner, sl algo.SegmentLearner, s *trainstate.State, behind bool) error {
	b, err := s.Section(secParams)
	if err != nil {
		return err
	}
	params := l.Agent.Params()
	n := 0
	for _, p := range params {
		n += len(p.Value)
	}
	if len(b) != 4*n {
		return fmt.Errorf("%w: %d bytes of parameters for %d values", trainstate.ErrCorrupt, len(b), n)
	}
	for _, p := range params {
		b = trainstate.ReadFloat32s(p.Value, b)
	}
	if b, err = s.Section(secOptimizer); err != nil {
		return err
	}
	opt, ok := l.Opt.(nn.StatefulOptimizer)
	if !ok {
		return fmt.Errorf("optimizer %T cannot restore its state", l.Opt)
	}
	if err := opt.UnmarshalState(params, b); err != nil {
		return err
	}
	if b, err = s.Section(secLearner); err != nil {
		return err
	}
	if len(b) < 8 {
		return fmt.Errorf("%w: section %s is short", trainstate.ErrCorrupt, secLearner)
	}
	l.n = binary.LittleEndian.Uint64(b)
	if ls, ok := sl.(LearnerState); ok {
		if err := ls.UnmarshalLearnerState(b[8:]); err != nil {
			return err
		}
	} else if len(b) != 8 {
		return fmt.Errorf("%w: section %s has %d bytes", trainstate.ErrCorrupt, secLearner, len(b))
	}
	if !behind || !l.Delayed {
		return nil
	}
	b, ok = s.Sections[secBehind]
	switch {
	case !ok && l.n > 0:
		return fmt.Errorf("%w: no section %s: the delayed gradient of learner version %d needs the parameters of version %d", trainstate.ErrCorrupt, secBehind, l.n, l.n-1)
	case !ok:
		l.start = nil
	case len(b) != 4*n:
		return fmt.Errorf("%w: section %s has %d bytes for %d values", trainstate.ErrCorrupt, secBehind, len(b), n)
	default:
		l.start = scratch.Resize(l.start, n)
		trainstate.ReadFloat32s(l.start, b)
	}
	return nil
}

// SaveLearner puts the learner's whole state into sections
// (algo.LearnerCheckpoint), the delayed gradient's copy of the previous
// version's parameters included.
func (l *Learner) SaveLearner(sections map[string][]byte) error {
	if l.self == nil {
		return errors.New("onpolicy: a learner not built by NewPieces cannot save its state")
	}
	return saveLearner(l, l.self, sections, true)
}

// RestoreLearner loads what SaveLearner saved (algo.LearnerCheckpoint).
func (l *Learner) RestoreLearner(s *trainstate.State) error {
	if l.self == nil {
		return errors.New("onpolicy: a learner not built by NewPieces cannot restore its state")
	}
	return restoreLearner(l, l.self, s, true)
}
