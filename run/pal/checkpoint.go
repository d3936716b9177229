package pal

import (
	"encoding"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"herd/algo"
	"herd/env"
	"herd/internal/trainstate"
)

// Sections of a PAL checkpoint, beside the learner's and the replay's
// (algo.OffPolicy.Checkpoint: "learner" and secReplay, as the local
// loop's) and TrainRun's own.
const (
	secLoop    = "pal/loop"        // the global env step, the versions published, the actors
	secReplay  = "replay"          // the replay's transitions, priorities, sum tree, FIFO position
	secSampler = "rng/env-worker/" // + actor index: the actor's sampler stream (PCG)
	// secSlot + slot + "/" + the learner's section: a gradient learner of
	// M > 1, saved for its random streams (its networks come with it,
	// though it takes the service's state again before its next gradient).
	secSlot = "pal/learner/"
	// secActor + actor index and one of the parts below: what the actor's envs
	// continue from (when every env's state can be saved).
	secActor = "pal/actor/"
)

// The parts of an actor's section (secActor + index + "/" + part).
const (
	partObs       = "obs"       // the observations acted on next
	partAssembler = "assembler" // every env's pending n-step steps
	partSampler   = "sampler"   // the sampler's own state (TD3's OU noise), when it has one
	partEnv       = "env/"      // + env index: env.MarshalChain
)

// actorSection names part of actor a's section.
func actorSection(a *actor, part string) string { return fmt.Sprintf("%s%d/%s", secActor, a.id, part) }

// actorsSaveable says why the actors' envs cannot be saved, or nil.
func actorsSaveable(actors []*actor) error {
	for _, a := range actors {
		if _, err := env.MarshalVector(a.envs); err != nil {
			return err
		}
		if _, ok := a.asm.(interface {
			encoding.BinaryMarshaler
			encoding.BinaryUnmarshaler
		}); !ok {
			return fmt.Errorf("assembler %T cannot save its state", a.asm)
		}
		if _, ok := a.sampler.(encoding.BinaryMarshaler); ok {
			if _, ok := a.sampler.(encoding.BinaryUnmarshaler); !ok {
				return fmt.Errorf("sampler %T cannot restore its state", a.sampler)
			}
		}
	}
	return nil
}

// checkpointer saves and restores a PAL run at a quiescent point: every
// step reserved is committed (its transitions are in the replay), the
// learner (with M > 1, the parameter service) has run every update due up
// to it, and no actor holds a reservation (nor, with M > 1, a gradient
// learner an update), so every actor is between two steps and its envs
// are saved with it (saveActor) and continue their episodes on resume.
// Where an env's state cannot be saved, each actor's envs start new
// episodes on resume instead (their unfinished episodes are neither
// stored nor logged), with reset seeds of the resumed step.
type checkpointer struct {
	ck      *algo.Checkpoints
	learner algo.LearnerCheckpoint // the learner (M > 1: the service's) and its replay
	actors  []*actor
	slots   []algo.LearnerCheckpoint // M > 1: the gradient learners, by slot
	envs    bool                     // the actors' envs are saved (actorsSaveable)
}

// newCheckpointer returns the run's checkpointer, nil when it takes none;
// for a run that cannot save its state it turns ck off (or fails a resume).
func newCheckpointer(ck *algo.Checkpoints, p *algo.Pieces, l algo.TransitionLearner, rb algo.Replay, actors []*actor) (*checkpointer, error) {
	if ck == nil {
		return nil, nil
	}
	c := &checkpointer{ck: ck, actors: actors}
	err := errors.New("pal: the algorithm's learner cannot save its state")
	if p.Checkpoint != nil {
		c.learner, err = p.Checkpoint(l, rb)
	}
	if err != nil {
		if ck.Restored() != nil {
			return nil, fmt.Errorf("pal: cannot resume: %w", err)
		}
		ck.Disable(err.Error())
		return nil, nil
	}
	if err := actorsSaveable(actors); err != nil {
		ck.EnvsNotSaved(err)
	} else {
		c.envs = true
	}
	return c, nil
}

// addLearners adds the M > 1 gradient learners (built by p) to the
// checkpoints, and restores them from the checkpoint being resumed.
func (c *checkpointer) addLearners(p *algo.Pieces, ws []*gradLearner) error {
	if p.Checkpoint == nil {
		return errors.New("pal: cannot resume: the algorithm's learner cannot save its state")
	}
	for _, w := range ws {
		lc, err := p.Checkpoint(w.l, nil)
		if err != nil {
			return fmt.Errorf("pal: learner %d: %w", w.id, err)
		}
		c.slots = append(c.slots, lc)
	}
	st := c.ck.Restored()
	if st == nil {
		return nil
	}
	for i, lc := range c.slots {
		prefix := fmt.Sprintf("%s%d/", secSlot, i)
		own := &trainstate.State{Header: st.Header, Sections: map[string][]byte{}}
		for name, b := range st.Sections {
			if rest, ok := strings.CutPrefix(name, prefix); ok {
				own.Sections[rest] = b
			}
		}
		if err := lc.RestoreLearner(own); err != nil {
			return fmt.Errorf("pal: resume from step %d: learner %d (sections %s…): %w", st.Header.Step, i, prefix, err)
		}
	}
	return nil
}

// save writes the checkpoint of global step step (quiescent).
func (c *checkpointer) save(step int64, versions int) error {
	out := map[string][]byte{}
	if err := c.learner.SaveLearner(out); err != nil {
		return err
	}
	for i, lc := range c.slots {
		own := map[string][]byte{}
		if err := lc.SaveLearner(own); err != nil {
			return fmt.Errorf("pal: learner %d: %w", i, err)
		}
		for name, b := range own {
			out[fmt.Sprintf("%s%d/%s", secSlot, i, name)] = b
		}
	}
	var err error
	loop := binary.LittleEndian.AppendUint64(nil, uint64(step))
	loop = binary.LittleEndian.AppendUint64(loop, uint64(versions))
	loop = binary.LittleEndian.AppendUint64(loop, uint64(len(c.actors)))
	out[secLoop] = loop
	for _, a := range c.actors {
		if out[fmt.Sprintf("%s%d", secSampler, a.id)], err = a.stream.MarshalBinary(); err != nil {
			return err
		}
		if c.envs {
			if err := saveActor(a, out); err != nil {
				return fmt.Errorf("pal: actor %d: %w", a.id, err)
			}
		}
	}
	if err := c.ck.Save(step, out); err != nil {
		return fmt.Errorf("pal: checkpoint at step %d not saved: %w", step, err)
	}
	return nil
}

// restore loads s into the freshly built learner, replay and actors and
// returns the global step and the versions published up to it.
func (c *checkpointer) restore(s *trainstate.State) (step int64, versions int, err error) {
	b, ok := s.Sections[secLoop]
	if !ok || len(b) != 24 {
		return 0, 0, fmt.Errorf("%w: section %s missing or not 24 bytes", trainstate.ErrCorrupt, secLoop)
	}
	step, versions = int64(binary.LittleEndian.Uint64(b)), int(binary.LittleEndian.Uint64(b[8:]))
	if n := binary.LittleEndian.Uint64(b[16:]); n != uint64(len(c.actors)) {
		return 0, 0, fmt.Errorf("%w: the checkpoint holds %d actors, the run has %d", trainstate.ErrCorrupt, n, len(c.actors))
	}
	if step != s.Header.Step {
		return 0, 0, fmt.Errorf("%w: the loop is at step %d, the header says %d", trainstate.ErrCorrupt, step, s.Header.Step)
	}
	if err := c.learner.RestoreLearner(s); err != nil {
		return 0, 0, err
	}
	for _, a := range c.actors {
		if err := s.Get(fmt.Sprintf("%s%d", secSampler, a.id), a.stream); err != nil {
			return 0, 0, err
		}
	}
	// A checkpoint without the actors' envs (written where they could not
	// be saved) leaves them to start new episodes.
	if _, ok := s.Sections[actorSection(c.actors[0], partObs)]; ok && c.envs {
		for _, a := range c.actors {
			if err := restoreActor(a, s); err != nil {
				return 0, 0, fmt.Errorf("pal: actor %d: %w", a.id, err)
			}
		}
	}
	return step, versions, nil
}

// saveActor adds actor a's envs to out: each env's state, the
// observations acted on next, the assembler's pending steps and the
// sampler's own state (OU noise). The actor is between two steps.
func saveActor(a *actor, out map[string][]byte) error {
	ebs, err := env.MarshalVector(a.envs)
	if err != nil {
		return err
	}
	for i, eb := range ebs {
		out[actorSection(a, fmt.Sprintf("%s%d", partEnv, i))] = eb
	}
	out[actorSection(a, partObs)] = trainstate.AppendFloat32s(nil, a.loop.Obs)
	if out[actorSection(a, partAssembler)], err = a.asm.(encoding.BinaryMarshaler).MarshalBinary(); err != nil {
		return err
	}
	if m, ok := a.sampler.(encoding.BinaryMarshaler); ok {
		if out[actorSection(a, partSampler)], err = m.MarshalBinary(); err != nil {
			return err
		}
	}
	return nil
}

// restoreActor loads what saveActor saved into the freshly built actor
// a, whose envs then continue instead of being reset.
func restoreActor(a *actor, s *trainstate.State) error {
	get := func(part string) ([]byte, error) { return s.Section(actorSection(a, part)) }
	if err := env.UnmarshalVector(a.envs, func(i int) ([]byte, error) { return get(fmt.Sprintf("%s%d", partEnv, i)) }); err != nil {
		return err
	}
	if _, ok := s.Sections[actorSection(a, fmt.Sprintf("%s%d", partEnv, a.n))]; ok {
		return fmt.Errorf("%w: the checkpoint holds more envs per actor than num_envs", trainstate.ErrCorrupt)
	}
	b, err := get(partObs)
	if err != nil {
		return err
	}
	if len(b) != 4*len(a.loop.Obs) {
		return fmt.Errorf("%w: %d bytes of observations for %d values", trainstate.ErrCorrupt, len(b), len(a.loop.Obs))
	}
	trainstate.ReadFloat32s(a.loop.Obs, b)
	if err := s.Get(actorSection(a, partAssembler), a.asm.(encoding.BinaryUnmarshaler)); err != nil {
		return err
	}
	if u, ok := a.sampler.(encoding.BinaryUnmarshaler); ok {
		if err := s.Get(actorSection(a, partSampler), u); err != nil {
			return err
		}
	}
	a.restored = true
	return nil
}
