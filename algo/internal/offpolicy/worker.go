package offpolicy

import (
	"context"
	"fmt"
	"math"

	"herd/algo"
	"herd/env"
	"herd/sample"
)

// EnvWorker is the env worker of the local executor: N synchronous envs
// (with episode statistics), the policy that acts on them, the sampler
// that turns its outputs into actions, and the assembler that turns the
// steps into n-step transitions. Each Step leaves the transitions it
// completed in Transitions for the replay.
//
// An EnvWorker allocates nothing per step once its buffers have grown; it
// belongs to the goroutine running Train.
type EnvWorker struct {
	Envs      env.Vector
	Policy    algo.PolicyNet
	Sampler   algo.Sampler
	Assembler algo.Assembler
	// Prioritizer, when not nil, sets the initial priorities of the
	// transitions each Step assembles (Ape-X), with Policy as the value.
	Prioritizer algo.Prioritizer
	// N is the number of envs, ObsDim the size of one observation.
	N, ObsDim int
	// Obs holds the N observations to act on next (N×ObsDim).
	Obs []float32
	// Out and Acts are the policy's outputs and the sampler's actions of
	// the last step.
	Out  []float32
	Acts algo.Acts
	// Batch is the result of the last Reset or Step.
	Batch *env.Batch
	// Steps counts global environment steps: N per Step.
	Steps int64
	// Transitions are those the last Step completed.
	Transitions sample.Transitions
}

// MakeEnvs makes n synchronous envs of id recording episode statistics.
func MakeEnvs(id string, n int) (env.Vector, error) {
	return env.MakeVector(id, n, env.Sync, env.WithEpisodeStatistics())
}

// NewEnvWorker joins envs (closed by the caller) with the pieces that act
// on them.
func NewEnvWorker(envs env.Vector, p algo.PolicyNet, s algo.Sampler, a algo.Assembler) (*EnvWorker, error) {
	if p == nil || s == nil || a == nil {
		return nil, fmt.Errorf("offpolicy: env worker needs a policy, a sampler and an assembler")
	}
	n, d := envs.NumEnvs(), envs.ObservationSpace().Dim()
	return &EnvWorker{Envs: envs, Policy: p, Sampler: s, Assembler: a, N: n, ObsDim: d,
		Obs: make([]float32, n*d), Out: make([]float32, n*p.OutDim())}, nil
}

// Reset resets every env with the run seed and takes the first
// observations.
func (w *EnvWorker) Reset(seed uint64) error {
	batch, err := w.Envs.Reset(int64(seed & math.MaxInt64)) // a negative seed would mean NoSeed
	if err != nil {
		return err
	}
	w.Batch = batch
	copy(w.Obs, batch.Obs)
	return nil
}

// Step acts on Obs (policy forward, then the sampler at the current step),
// steps the envs, assembles the transitions into Transitions (s' is the
// true final observation where an episode ended), logs finished episodes
// at the new global step, resets per-env sampler state where an episode
// ended, and copies the next observations into Obs: the hand-off, with the
// next episode's first observation where one ended.
func (w *EnvWorker) Step(log algo.Logger) error {
	w.Sampler.SampleTo(&w.Acts, w.Policy.ForwardTo(w.Out, w.Obs, w.N), w.N, w.Steps)
	batch, err := w.Envs.Step(w.Acts.EnvActions)
	if err != nil {
		return err
	}
	w.Batch = batch
	w.Steps += int64(w.N)
	ClearTransitions(&w.Transitions)
	if err := w.Assembler.Add(&w.Transitions, w.Obs, w.Acts.Actions, batch); err != nil {
		return err
	}
	if w.Prioritizer != nil {
		if err := w.Prioritizer.Prioritize(&w.Transitions, w.Policy); err != nil {
			return err
		}
	}
	for _, e := range w.Transitions.Episodes {
		log.Episode(w.Steps, e.Return, e.Length)
	}
	if r, ok := w.Sampler.(algo.EnvResetter); ok {
		for i := range w.N {
			if batch.Done(i) {
				r.ResetEnv(i)
			}
		}
	}
	copy(w.Obs, batch.Obs)
	return nil
}

// CheckEnv reports why env id cannot run a tanh-squashed continuous actor
// (unknown env, or an action space that is not a bounded Box), or nil. An
// empty id is not checked: Validate may run before the env is chosen.
func CheckEnv(id string) error {
	if id == "" {
		return nil
	}
	e, err := env.Make(id)
	if err != nil {
		return fmt.Errorf("env %q: %v", id, err)
	}
	defer e.Close()
	_, _, err = BoxBounds(id, e.ActionSpace())
	return err
}

// Run is the local executor's loop, the same for every off-policy
// algorithm: until `steps` env steps have passed, act and step the envs
// (Step), store the assembled transitions in rb, run the updates due for
// the steps just taken (TransitionLearner.Learn holds the replay ratio),
// and log. It stops at a step boundary when ctx ends and returns ctx's
// error; name prefixes the other errors.
func (w *EnvWorker) Run(ctx context.Context, log algo.Logger, name string, rb algo.Replay, learner algo.TransitionLearner, steps int64) error {
	for w.Steps < steps {
		if err := ctx.Err(); err != nil {
			return err
		}
		prev := w.Steps
		if err := w.Step(log); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if err := rb.Add(&w.Transitions); err != nil {
			return fmt.Errorf("%s: store: %w", name, err)
		}
		stats, err := learner.Learn(ctx, rb, prev, w.Steps)
		if err != nil {
			return err
		}
		LogStats(log, stats)
		log.Step(w.Steps)
	}
	return nil
}
