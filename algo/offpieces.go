package algo

import (
	"context"
	"math/rand/v2"

	"herd/env"
	"herd/sample"
	"herd/weights"
)

// OffPolicy are the pieces only off-policy algorithms (DQN, SAC, TD3,
// DDPG) have: the env worker's transition assembly, the replay memory and
// the learner. Pieces embeds it; all three are nil for on-policy
// algorithms.
//
// An executor wires them as the local one does:
//
//	env worker:  outputs := policy.ForwardTo(out, obs, n)
//	             sampler.SampleTo(&acts, outputs, n, step)
//	             batch := envs.Step(acts.EnvActions)
//	             assembler.Add(tr, obs, acts.Actions, batch)  // n-step transitions
//	             prioritizer.Prioritize(tr, policy)              // optional (Ape-X)
//	replay:      rb.Add(tr)
//	learner:     if step > learning starts && rb.Len() ≥ batch size:
//	                 learner.Learn(ctx, rb, prevStep, step)
//	             policy.SetWeights(learner.Weights())          // every k updates
type OffPolicy struct {
	// NewAssembler builds the transition assembler of an env worker
	// stepping numEnvs envs (one n-step accumulator per env).
	NewAssembler func(numEnvs int) (Assembler, error)
	// NewReplay builds the run's replay memory (uniform or prioritized,
	// with the configured capacity).
	NewReplay func() (Replay, error)
	// NewTransitionLearner builds a learner holding the run's initial
	// weights (version 0, the same as NewPolicy's).
	NewTransitionLearner func() (TransitionLearner, error)
	// NewPrioritizer is nil unless the run asked for Ape-X initial
	// priorities (DQN: initial_priorities: actor); it then builds one
	// Prioritizer per env worker, which sets the priorities of the
	// transitions it assembled before they go to the replay.
	NewPrioritizer func() (Prioritizer, error)
}

// Prioritizer computes Ape-X initial priorities on an env worker (Horgan
// et al. 2018): instead of entering the prioritized replay at the running
// maximum, each transition enters at |δ| + ε, its TD error under the
// actor's local policy copy. It keeps workspaces and is not safe for
// concurrent use.
type Prioritizer interface {
	// Prioritize sets tr.Priorities (N of them) from the transitions'
	// rewards, bootstrap discounts γ^m and dones, with pol — the env
	// worker's policy copy, whose outputs the algorithm knows how to read
	// (DQN: Q-values) — as the value function. It returns an error, and
	// leaves tr.Priorities empty, when a priority is not a finite number.
	Prioritize(tr *sample.Transitions, pol PolicyNet) error
}

// Assembler runs on an env worker beside the sampler and turns its envs'
// one-step experience into the n-step transitions the learner trains on
// (reward sums, bootstrap discounts γ^m, the true final observation where
// an episode ended). It keeps per-env history and is not safe for
// concurrent use.
type Assembler interface {
	// Add records one vector step — the observations acted on (n × obs
	// dim), the actions as the learner stores them (Acts.Actions) and the
	// batch the envs returned — and appends the transitions it completed,
	// and the episodes that ended, to dst. Rows come out env by env.
	Add(dst *sample.Transitions, obs, actions []float32, b *env.Batch) error
}

// Minibatch is a batch of transitions drawn from a Replay for a learner.
// Its slices may alias the replay's workspace: they are valid until that
// replay's next Sample.
type Minibatch struct {
	// Transitions holds the rows (N of them); Priorities and Episodes are
	// unused.
	sample.Transitions
	// Weights are the importance-sampling weights of prioritized replay
	// (largest 1); all 1 for uniform replay.
	Weights []float32
	// Index and Gen name the replay slots the rows came from and their
	// generations, for UpdatePriorities.
	Index []int
	Gen   []uint64
}

// Replay is the replay memory between env workers and learners.
type Replay interface {
	// Add copies tr's rows into the memory, evicting the oldest when full.
	Add(tr *sample.Transitions) error
	// Len is the number of transitions held.
	Len() int
	// Sample draws n transitions into dst with r (the learner's own
	// stream). step is the global env step: prioritized replay anneals its
	// importance exponent β with it.
	Sample(dst *Minibatch, n int, step int64, r *rand.Rand) error
	// UpdatePriorities sets the priorities of mb's rows to |tdErr| + ε
	// (prioritized replay; a no-op for uniform). Slots overwritten since
	// mb was drawn are skipped.
	UpdatePriorities(mb *Minibatch, tdErr []float32) error
}

// ForkReplay is implemented by replays whose memory is safe for concurrent
// use but whose per-call workspaces are not: Fork returns a Replay over the
// same memory with workspaces of its own, one per goroutine (the pal
// executor's actors and learner).
type ForkReplay interface {
	Fork() Replay
}

// TransitionShape is implemented by the off-policy configs: the envs one
// env worker steps and the update interval U, env steps per learner update
// (DQN: train_frequency / gradient_steps; SAC, TD3, DDPG: 1). The pal
// executor sizes its actors and checks runtime.update_interval with it.
type TransitionShape interface {
	TransitionShape() (numEnvs int, updateInterval float64)
}

// TransitionLearner learns from a Replay (DQN, SAC, TD3, DDPG).
type TransitionLearner interface {
	// Learn runs the updates due for the global env steps (prev, step]
	// after learning starts (none while step ≤ learning_starts or rb holds
	// less than a minibatch). Each algorithm's schedule is in env steps
	// (DQN: gradient_steps per multiple of train_frequency passed; SAC,
	// TD3, DDPG: one update per env step), so the number of updates per
	// env step — the replay ratio — does not depend on how the executor
	// groups env steps (num_envs, steps per call). Each update draws its
	// minibatch from rb with the learner's own stream and feeds TD errors
	// back as priorities. It returns the last update's scalars (none when
	// no update was due); the slice is reused by the next call.
	Learn(ctx context.Context, rb Replay, prev, step int64) ([]Stat, error)
	// Weights returns the policy's current parameters (DQN's Q-network,
	// the actor of the others) as a new version; its number counts the
	// updates so far (0: the initial weights, the same as NewPolicy's).
	Weights() *weights.Version
	// Close stops the learner's helper goroutine, if any.
	Close() error
}

// EnvResetter is implemented by samplers that keep per-env state (TD3's
// Ornstein–Uhlenbeck noise): an executor calls ResetEnv(i) when env i's
// episode ended, before the next SampleTo.
type EnvResetter interface {
	ResetEnv(i int)
}
