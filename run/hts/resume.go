package hts

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"

	"herd/algo"
	"herd/env"
	"herd/internal/trainstate"
	"herd/sample"
)

// Sections of an HTS checkpoint, beside the learner's
// (algo.LearnerCheckpoint) and TrainRun's own.
const (
	secLoop    = "hts/loop"        // the segment index k and the global env step
	secSegment = "hts/segment"     // segment k, gathered and not learned yet (sample.Segment encoding)
	secObs     = "hts/obs"         // every env's next observation, in env order
	secSampler = "rng/env-worker/" // + env index: the env's sampler stream (PCG)
	secEnv     = "env/"            // + env index: env.MarshalChain
	secState   = "policy/state"    // a recurrent policy's state of every env, the one its next step starts from
)

// checkpointer saves and restores an HTS run at a barrier.
//
// A checkpoint is taken at the barrier that ends segment k, after the
// learner's update of segment k−1 has been collected and published as
// version k and before the learner is handed segment k. There the double
// buffer holds: segment k (gathered with version k−1, not learned yet:
// saved), the other storage (completely rewritten by segment k+1: not
// saved), the learner at θ_k with θ_{k−1} kept for the delayed gradient
// (both saved by the learner), and the published version k (the
// learner's θ_k: re-derived). Every env is between two steps, so its
// state, its sampler's stream and its next observation are whole. No
// update is in flight, so taking the checkpoint costs no waiting.
type checkpointer struct {
	learner  algo.LearnerCheckpoint
	envs     []env.Env
	samplers []*rand.PCG // one per env: ("env-worker", i)
	ews      []*envWorker
	state    []float32 // a recurrent policy's rows' states (rowPolicy's), nil for a stateless one
	// restart: the envs cannot save their state, so checkpoints leave
	// them and the recurrent state of them out, and a resumed run starts
	// their episodes anew (seed: the run's, for their reset seeds).
	restart bool
	seed    uint64
}

// saveable reports why a run cannot be checkpointed, or nil.
func saveable(sl algo.SegmentLearner, envs []env.Env, multiPolicy, multiAgent, sync bool) error {
	switch {
	case multiPolicy:
		return errors.New("hts: a run with a multiagent section saves no training state yet")
	case multiAgent:
		return errors.New("hts: a multi-agent env's slots save no state yet")
	case sync:
		return errors.New("hts: the synchronous baseline saves no training state")
	}
	if _, ok := sl.(algo.LearnerCheckpoint); !ok {
		return fmt.Errorf("hts: learner %T cannot save its state", sl)
	}
	return nil
}

// envsSaveable reports whether the envs' state can be saved (the first
// env's failure, env.MarshalChain).
func envsSaveable(ck *algo.Checkpoints, envs []env.Env) (bool, error) {
	for _, e := range envs {
		if _, err := env.MarshalChain(e); err != nil {
			return ck.EnvsSaveable(err)
		}
	}
	return true, nil
}

// save returns the sections of the checkpoint at the barrier ending
// segment k (seg) at global env step step.
func (c *checkpointer) save(k int, step int64, seg *sample.Segment) (map[string][]byte, error) {
	out := map[string][]byte{}
	if err := c.learner.SaveLearner(out); err != nil {
		return nil, err
	}
	out[secLoop] = binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, uint64(k)), uint64(step))
	var err error
	if out[secSegment], err = seg.AppendEncode(nil); err != nil {
		return nil, err
	}
	var obs []byte
	for _, w := range c.ews {
		obs = trainstate.AppendFloat32s(obs, w.loop.Observations())
	}
	out[secObs] = obs
	if c.state != nil && !c.restart {
		out[secState] = trainstate.AppendFloat32s(nil, c.state)
	}
	for i, e := range c.envs {
		if out[fmt.Sprintf("%s%d", secSampler, i)], err = c.samplers[i].MarshalBinary(); err != nil {
			return nil, err
		}
		if c.restart {
			continue
		}
		if out[fmt.Sprintf("%s%d", secEnv, i)], err = env.MarshalChain(e); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// restore loads the envs, their samplers and next observations of s into
// the freshly reset workers, and returns the segment index k, the global
// step and segment k, which the learner is to learn next. The learner is
// restored apart (before the policy workers start).
func (c *checkpointer) restore(s *trainstate.State, like *sample.Segment) (k int, step int64, seg *sample.Segment, err error) {
	get := s.Section
	b, err := get(secLoop)
	if err != nil {
		return 0, 0, nil, err
	}
	if len(b) != 16 {
		return 0, 0, nil, fmt.Errorf("%w: section %s has %d bytes", trainstate.ErrCorrupt, secLoop, len(b))
	}
	k, step = int(binary.LittleEndian.Uint64(b)), int64(binary.LittleEndian.Uint64(b[8:]))
	if step != s.Header.Step {
		return 0, 0, nil, fmt.Errorf("%w: the loop is at step %d, the header says %d", trainstate.ErrCorrupt, step, s.Header.Step)
	}
	if b, err = get(secSegment); err != nil {
		return 0, 0, nil, err
	}
	if seg, err = sample.DecodeSegment(b); err != nil {
		return 0, 0, nil, fmt.Errorf("section %s: %w", secSegment, err)
	}
	if seg.T != like.T || seg.N != like.N || seg.ObsDim != like.ObsDim || seg.ActDim != like.ActDim {
		return 0, 0, nil, fmt.Errorf("%w: the saved segment is %d×%d (obs %d, actions %d), the run's %d×%d (obs %d, actions %d)",
			trainstate.ErrCorrupt, seg.T, seg.N, seg.ObsDim, seg.ActDim, like.T, like.N, like.ObsDim, like.ActDim)
	}
	if len(seg.State) != len(c.state) {
		return 0, 0, nil, fmt.Errorf("%w: the saved segment has %d state values, the run's policy %d", trainstate.ErrCorrupt, len(seg.State), len(c.state))
	}
	if c.state != nil && !c.restart {
		if b, err = get(secState); err != nil {
			return 0, 0, nil, err
		}
		if len(b) != 4*len(c.state) {
			return 0, 0, nil, fmt.Errorf("%w: section %s has %d bytes for %d state values", trainstate.ErrCorrupt, secState, len(b), len(c.state))
		}
		trainstate.ReadFloat32s(c.state, b)
	}
	if b, err = get(secObs); err != nil {
		return 0, 0, nil, err
	}
	n := 0
	for _, w := range c.ews {
		n += len(w.loop.Observations())
	}
	if len(b) != 4*n {
		return 0, 0, nil, fmt.Errorf("%w: section %s has %d bytes for %d observation values", trainstate.ErrCorrupt, secObs, len(b), n)
	}
	for _, w := range c.ews {
		obs := make([]float32, len(w.loop.Observations()))
		b = trainstate.ReadFloat32s(obs, b)
		w.loop.Start(obs)
	}
	for i, e := range c.envs {
		if b, err = get(fmt.Sprintf("%s%d", secSampler, i)); err != nil {
			return 0, 0, nil, err
		}
		if err := c.samplers[i].UnmarshalBinary(b); err != nil {
			return 0, 0, nil, fmt.Errorf("section %s%d: %w", secSampler, i, err)
		}
		if c.restart {
			continue
		}
		if b, err = get(fmt.Sprintf("%s%d", secEnv, i)); err != nil {
			return 0, 0, nil, err
		}
		if err := env.UnmarshalChain(e, b); err != nil {
			return 0, 0, nil, err
		}
	}
	if _, ok := s.Sections[fmt.Sprintf("%s%d", secEnv, len(c.envs))]; ok {
		return 0, 0, nil, errors.New("hts: the checkpoint holds more envs than num_envs")
	}
	if c.restart {
		if err := c.restartEnvs(step); err != nil {
			return 0, 0, nil, err
		}
	}
	return k, step, seg, nil
}

// restartEnvs starts new episodes in every env, slot i with its own seed
// of the resumed step (so that the slots' spread over workers changes
// nothing), and hands each worker its envs' first observations.
func (c *checkpointer) restartEnvs(step int64) error {
	i := 0
	for _, w := range c.ews {
		obs := make([]float32, 0, len(w.loop.Observations()))
		for len(obs) < cap(obs) {
			o, _, err := c.envs[i].Reset(algo.RestartSeed(c.seed, fmt.Sprintf("hts/env/%d", i), step))
			if err != nil {
				return fmt.Errorf("hts: reset env %d: %w", i, err)
			}
			obs = append(obs, o...)
			i++
		}
		w.loop.Start(obs)
	}
	return nil
}
