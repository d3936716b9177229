package rollout

import (
	"fmt"

	"herd/algo"
	"herd/env"
	"herd/sample"
)

// Transitions is the off-policy env-step loop: every executor that stores
// transitions (the local executor, PAL's actors, the dist executor's env
// workers, the dataflow replay workers) steps its envs through one. A Step
// acts on Obs with the Policy at a global step the caller names (the
// sampler's schedules: each executor counts steps its own way), steps the
// envs, appends the completed n-step transitions to the caller's batch
// (s' is the true final observation where an episode ended, which is how
// the assembler bootstraps a truncation), resets the policy's per-env
// state where an episode ended, and hands the next observations (the next
// episode's first where one ended) to Obs.
//
// What happens to the transitions — a replay, a message, an item of a
// plan — and when weights move is the executor's. Not safe for concurrent
// use; nothing is allocated per Step once the buffers have grown.
type Transitions struct {
	envs      env.Vector
	policy    Policy
	assembler algo.Assembler
	n, actDim int
	// Obs holds the N observations acted on next (N × observation size).
	// A caller that runs several loops off one batched forward pass may
	// point it into a larger buffer before Reset.
	Obs []float32
	// Acts are the actions of the last Step.
	Acts algo.Acts
	// Batch is the result of the last Reset or Step.
	Batch *env.Batch
}

// NewTransitions joins envs (closed by the caller) with the policy that
// acts on them and the assembler that makes their steps into transitions.
func NewTransitions(envs env.Vector, p Policy, a algo.Assembler) (*Transitions, error) {
	if envs == nil || p == nil || a == nil {
		return nil, fmt.Errorf("rollout: transitions need envs, a policy and an assembler")
	}
	n := envs.NumEnvs()
	actDim := 1
	if b, ok := envs.ActionSpace().(env.Box); ok {
		actDim = b.Dim()
	}
	return &Transitions{envs: envs, policy: p, assembler: a, n: n, actDim: actDim,
		Obs: make([]float32, n*envs.ObservationSpace().Dim())}, nil
}

// NumEnvs is the number of envs stepped together.
func (t *Transitions) NumEnvs() int { return t.n }

// Reset resets every env with seed and takes the first observations.
func (t *Transitions) Reset(seed int64) error {
	b, err := t.envs.Reset(seed)
	if err != nil {
		return fmt.Errorf("rollout: reset: %w", err)
	}
	t.Batch = b
	copy(t.Obs, b.Obs)
	return nil
}

// Step takes one step of every env at global step `step` and appends the
// transitions it completed to tr (the caller empties tr when it wants a
// fresh batch: ClearTransitions). Episodes that ended are in
// tr.Episodes.
func (t *Transitions) Step(step int64, tr *sample.Transitions) error {
	if err := t.policy.Act(&t.Acts, t.Obs, t.n, step); err != nil {
		return err
	}
	if err := checkActs(&t.Acts, t.n, t.actDim); err != nil {
		return err
	}
	b, err := t.envs.Step(t.Acts.EnvActions)
	if err != nil {
		return err
	}
	t.Batch = b
	if err := t.assembler.Add(tr, t.Obs, t.Acts.Actions, b); err != nil {
		return err
	}
	if r, ok := t.policy.(EnvResetter); ok {
		for i := range t.n {
			if b.Done(i) {
				r.ResetEnv(i)
			}
		}
	}
	copy(t.Obs, b.Obs)
	return nil
}

// ClearTransitions empties tr, keeping its storage and shape.
func ClearTransitions(tr *sample.Transitions) {
	tr.N = 0
	tr.Obs, tr.Actions, tr.Rewards, tr.NextObs = tr.Obs[:0], tr.Actions[:0], tr.Rewards[:0], tr.NextObs[:0]
	tr.Discounts, tr.Dones, tr.Priorities, tr.Episodes = tr.Discounts[:0], tr.Dones[:0], tr.Priorities[:0], tr.Episodes[:0]
}
