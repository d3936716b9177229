package offpolicy

import (
	"fmt"
	"math"

	"herd/algo"
	"herd/env"
	"herd/rollout"
	"herd/sample"
)

// EnvWorker is the env worker of the local executor: the one off-policy
// env-step loop (rollout.Transitions) with the policy inline, the global
// step count, and the Ape-X prioritizer. Each Step leaves the transitions
// it completed in Transitions for the replay.
//
// An EnvWorker allocates nothing per step once its buffers have grown; it
// belongs to the goroutine running Train.
type EnvWorker struct {
	// Loop steps the envs.
	Loop *rollout.Transitions
	// Policy is the network that acts (and values transitions for the
	// Prioritizer).
	Policy algo.PolicyNet
	// Prioritizer, when not nil, sets the initial priorities of the
	// transitions each Step assembles (Ape-X), with Policy as the value.
	Prioritizer algo.Prioritizer
	// Steps counts global environment steps: NumEnvs per Step.
	Steps int64
	// Transitions are those the last Step completed.
	Transitions sample.Transitions
}

// MakeEnvs makes n synchronous envs of id recording episode statistics.
func MakeEnvs(mk env.Maker, id string, n int) (env.Vector, error) {
	return mk.MakeVector(id, n, env.Sync, env.WithEpisodeStatistics())
}

// NewEnvWorker joins envs (closed by the caller) with the pieces that act
// on them.
func NewEnvWorker(envs env.Vector, p algo.PolicyNet, s algo.Sampler, a algo.Assembler) (*EnvWorker, error) {
	if p == nil || s == nil || a == nil {
		return nil, fmt.Errorf("offpolicy: env worker needs a policy, a sampler and an assembler")
	}
	loop, err := rollout.NewTransitions(envs, rollout.NewInline(p, s), a)
	if err != nil {
		return nil, err
	}
	return &EnvWorker{Loop: loop, Policy: p}, nil
}

// Reset resets every env with the run seed and takes the first
// observations.
func (w *EnvWorker) Reset(seed uint64) error {
	return w.Loop.Reset(int64(seed & math.MaxInt64)) // a negative seed would mean NoSeed
}

// Step takes one step of the loop at the current global step, prioritizes
// what it assembled, and logs the episodes that ended at the new global
// step.
func (w *EnvWorker) Step(log algo.Logger) error {
	rollout.ClearTransitions(&w.Transitions)
	if err := w.Loop.Step(w.Steps, &w.Transitions); err != nil {
		return err
	}
	w.Steps += int64(w.Loop.NumEnvs())
	if w.Prioritizer != nil {
		if err := w.Prioritizer.Prioritize(&w.Transitions, w.Policy); err != nil {
			return err
		}
	}
	for _, e := range w.Transitions.Episodes {
		log.Episode(w.Steps, e.Return, e.Length)
	}
	return nil
}

// CheckEnv reports why env id cannot run a tanh-squashed continuous actor
// (unknown env, or an action space that is not a bounded Box), or nil. An
// empty id is not checked: Validate may run before the env is chosen.
func CheckEnv(mk env.Maker, id string) error {
	if id == "" {
		return nil
	}
	e, err := mk.Make(id)
	if err != nil {
		return fmt.Errorf("env %q: %v", id, err)
	}
	defer e.Close()
	_, _, err = BoxBounds(id, e.ActionSpace())
	return err
}
