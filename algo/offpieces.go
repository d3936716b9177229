package algo

import (
	"context"
	"errors"
	"fmt"
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
	// Checkpoint, when set, returns the checkpoint of a learner and the
	// replay it learns from (both built by these pieces): the learner's
	// whole state and the replay's transitions, priorities and position,
	// the sections the local executor's resume saves for them; with rb
	// nil, the learner's section alone. nil: the pair cannot be saved.
	Checkpoint func(l TransitionLearner, rb Replay) (LearnerCheckpoint, error)
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

// WarmUpper is implemented by the off-policy configs: WarmUp returns the
// env steps taken before the first update (learning_starts), during which
// the actors work and the learners have nothing to do. herd tune predicts
// a run's wall time with it.
type WarmUpper interface {
	WarmUp() int64
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

// Ticket names one update in an algorithm's schedule: the global env step
// it is due at (Step: prioritized replay's β, learning-rate annealing,
// SAC's delays) and its number, counting from 1 (Index: TD3's and DDPG's
// delayed actor). SplitLearner.Due hands them out in schedule order, at
// phase 0.
type Ticket struct {
	Step  int64
	Index uint64
	// Phase is the part of the update a gradient is for, 0 … Phases−1
	// (see Phaser): an actor-critic's actor gradient is taken after its
	// critic step, as one learner takes it, so the executor applies phase
	// 0 (the critics) before it asks for phase 1 (the actor).
	Phase int
}

// Phaser is a SplitLearner whose updates come in phases, each a gradient
// at the parameters the previous phases left, averaged over the learners
// and applied before the next phase's gradient is computed: TD3's and
// DDPG's actor update is a critic phase then an actor phase, SAC's a
// critic phase then policy_frequency actor (and α) phases, all on the
// minibatch phase 0 drew. Each phase of update t goes to the same learners
// with the state after the previous phase's apply. An update counts once
// (its phase 0's Apply); the target updates come with its last phase.
type Phaser interface {
	// Phases returns the number of phases of update t (at least 1).
	Phases(t Ticket) int
}

// Phases returns l's number of phases for update t: 1 unless l is a
// Phaser.
func Phases(l SplitLearner, t Ticket) int {
	if p, ok := l.(Phaser); ok {
		return max(1, p.Phases(t))
	}
	return 1
}

// Grad is a gradient buffer a caller owns: the flat gradients of a
// learner's parameter groups, in the learner's fixed order (DQN: Q; SAC:
// critics, actor, log α; TD3, DDPG: critics, actor). SplitLearner.NewGrad
// sizes one; SplitLearner.Grad fills it; AverageGrads merges several.
type Grad struct {
	// Ticket is the update the gradient was computed for (the last one
	// when several were averaged).
	Ticket
	// N counts the minibatch gradients merged into this one (1 from Grad).
	N int
	// Parts are the flat gradients of each parameter group; Has[i] counts
	// the merged gradients that carry part i (a delayed actor's part is
	// absent from most updates).
	Parts [][]float32
	Has   []int
	// Steps are per-part counts of optimizer steps the apply step takes
	// with the part; 0 means 1. (SAC's policy_frequency actor steps are
	// phases, each with its own gradient: see Phaser.)
	Steps []int
	// Targets is the number of target-network updates the gradient's
	// updates are due (SAC: one per multiple of target_network_frequency;
	// TD3, DDPG: one per actor update), set on an update's last phase. DQN's are keyed to env steps and
	// taken by Advance.
	Targets int
	// Stats are the update's scalars, as Learn reports them.
	Stats []Stat
}

// ErrGradShape marks a gradient buffer that does not fit the learner or
// the other gradients (not sized by the same learner's NewGrad).
var ErrGradShape = errors.New("algo: gradient buffers do not match")

// AverageGrads sets dst to the average of gs, summed in the order given
// (the pal executor passes them in learner-id order, so the result does
// not depend on which learner finished first): each part is the mean over
// the gradients that carry it, Targets and Steps take the largest, Stats
// the mean, Ticket the last one's, N the sum. All must come from one
// learner's NewGrad.
func AverageGrads(dst *Grad, gs []*Grad) error {
	if len(gs) == 0 {
		return errors.New("algo: no gradients to average")
	}
	g0 := gs[0]
	if len(dst.Parts) != len(g0.Parts) {
		return fmt.Errorf("%w: a gradient of %d parts into one of %d", ErrGradShape, len(g0.Parts), len(dst.Parts))
	}
	dst.N, dst.Targets, dst.Ticket = 0, 0, gs[len(gs)-1].Ticket
	dst.Stats = append(dst.Stats[:0], g0.Stats...)
	for i := range dst.Parts {
		dst.Has[i], dst.Steps[i] = 0, 0
		clear(dst.Parts[i])
	}
	for k, g := range gs {
		if len(g.Parts) != len(dst.Parts) || len(g.Stats) != len(g0.Stats) {
			return fmt.Errorf("%w: gradients of different learners", ErrGradShape)
		}
		dst.N += g.N
		dst.Targets = max(dst.Targets, g.Targets)
		if k > 0 {
			for j, s := range g.Stats {
				dst.Stats[j].Value += s.Value
			}
		}
		for i, p := range g.Parts {
			if g.Has[i] == 0 {
				continue
			}
			if len(p) != len(dst.Parts[i]) {
				return fmt.Errorf("%w: part %d has %d values, want %d", ErrGradShape, i, len(p), len(dst.Parts[i]))
			}
			d := dst.Parts[i]
			for j, v := range p {
				d[j] += v
			}
			dst.Has[i] += g.Has[i]
			dst.Steps[i] = max(dst.Steps[i], g.Steps[i])
		}
	}
	for j := range dst.Stats {
		dst.Stats[j].Value /= float64(len(gs))
	}
	for i, n := range dst.Has {
		if n > 1 {
			inv := 1 / float32(n)
			for j := range dst.Parts[i] {
				dst.Parts[i][j] *= inv
			}
		}
	}
	return nil
}

// SplitLearner is a TransitionLearner whose updates are cut into a
// gradient step and an apply step, so that several learners can compute
// gradients while one parameter service applies them (the pal executor's
// learners: M > 1). For SAC, TD3 and DDPG, Learn is Grad then Apply on
// the learner itself, phase by phase (see Phaser): one update written
// once; DQN's Learn gives the same bits as Grad then Apply.
//
// A gradient learner is a SplitLearner of its own (built by
// NewTransitionLearner, then SetSlot): it takes the service's State,
// computes Grad on its own minibatch with its own streams, and never
// steps an optimizer; the service applies what it gets with Apply.
type SplitLearner interface {
	TransitionLearner
	// SetSlot makes the learner draw minibatches (and any noise inside
	// updates) from the streams of learner slot i: the algorithm's own
	// stream names with id i, so slot 0 draws what Learn draws.
	SetSlot(i int)
	// Due appends to dst the updates due for global env steps (prev,
	// step] — the schedule Learn follows — numbered from next, and
	// returns dst. None are due while step ≤ learning_starts or rb holds
	// less than a minibatch.
	Due(dst []Ticket, rb Replay, prev, step int64, next uint64) []Ticket
	// State returns everything a gradient depends on — online and target
	// networks, SAC's log α — as an immutable version numbered by the
	// updates applied.
	State() *weights.Version
	// SetState makes the learner compute its next gradients at s.
	SetState(s *weights.Version) error
	// NewGrad returns a gradient buffer sized for the learner.
	NewGrad() *Grad
	// Grad draws a minibatch from rb (the learner's slot stream; phase 0
	// only, later phases reuse it), computes the gradients of update t's
	// phase at the learner's current parameters into g, and feeds the TD
	// errors back as priorities. It changes no parameter.
	Grad(ctx context.Context, rb Replay, t Ticket, g *Grad) error
	// Apply takes the optimizer steps with g, then the target-network
	// updates it is due, and counts g.N updates (phase 0). It returns the
	// update's scalars so far: after its last phase, the update's.
	Apply(g *Grad) ([]Stat, error)
}

// Advancer is implemented by split learners with updates keyed to env
// steps rather than to gradient updates (DQN's target syncs). An executor
// calls Advance(rb, prev, step) once the updates Due handed out for
// (prev, step] are applied, with a replay of the length Due saw, so that
// these updates are Learn's over the same steps in number and in step.
type Advancer interface {
	Advance(rb Replay, prev, step int64) error
}

// UpdateCounts are the steps a transition learner has taken: optimizer
// steps on its critic (DQN: the Q-network) and on its actor, and
// target-network updates (each Polyak update or copy of all targets
// counts once). An executor's learners must take the single-process
// algorithm's counts for the same env steps.
type UpdateCounts struct {
	Critic, Actor, Target uint64
}

// UpdateCounter is a learner that counts its steps (the off-policy
// algorithms' learners).
type UpdateCounter interface {
	UpdateCounts() UpdateCounts
}

// ReplaySizer is a config whose replay capacity can be changed: the dist
// executor's M data-parallel off-policy learners each keep a replay of
// buffer_size/M transitions, fed by 1/M of the env workers, so that
// together they hold the most recent buffer_size, as one learner's does.
type ReplaySizer interface {
	Config
	ReplayCapacity() int
	WithReplayCapacity(n int) Config
}

// With returns a copy of *c that set has changed: the body of a config's
// WithMinibatch and WithReplayCapacity.
func With[C any](c *C, set func(*C)) *C {
	d := *c
	set(&d)
	return &d
}

// Minibatcher is a config whose minibatch size can be changed: the pal
// executor's sync learners (off-policy) and the dist executor's
// data-parallel learners (PPO) each compute one update's gradient on a
// share of its minibatch.
type Minibatcher interface {
	Config
	Minibatch() int
	WithMinibatch(n int) Config
}
