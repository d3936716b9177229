// Package offpolicy holds the pieces and the small pieces of math that
// herd's off-policy algorithms (algo/dqn, algo/sac, algo/td3, algo/ddpg)
// share, so that each algorithm file reads top to bottom like CleanRL's
// scripts while the shared equations and plumbing live, tested once, here.
//
// # Pieces (algo.Pieces, issue #12)
//
//   - MLPPolicy: the policy (algo.PolicyNet) of all four: one MLP, plus an
//     optional deterministic row-wise head (TD3/DDPG's tanh), rebuilt from
//     a weights.Version (SetWeights) whose layout Params gives.
//   - NoisySampler: TD3's and DDPG's sampler (uniform warm-up actions,
//     then μ(s) + Gaussian or per-env OU noise; ResetEnv at episode ends).
//     SizeActs and RandomActionsTo serve the other samplers.
//   - Assembler: the env-worker side, one NStep per env, appending the
//     n-step transitions a vector step completes (and the episodes that
//     ended) to a sample.Transitions.
//   - Replay: the replay memory (algo.Replay): a replay.Uniform or
//     replay.Prioritized buffer of those transitions, flat minibatches
//     (algo.Minibatch) with per-row discount, importance weights and the
//     slots for priority updates, β annealed with the global step.
//   - EnvWorker: the local executor's env worker (envs, policy, sampler,
//     assembler; Step = forward, sample, env step, assemble, log episodes).
//   - ActorPieces: the policy, sampler, assembler and replay TD3 and DDPG
//     build alike; NewPieces: typed constructors → algo.Pieces.
//
// # Math
//
//   - LinearSchedule: CleanRL's linear_schedule, used for DQN's ε and PER's β.
//   - NStep: turns one environment's one-step transitions into n-step
//     transitions with their own discount γ^m, handling termination (no
//     bootstrap) and truncation (bootstrap from the true final observation)
//     at episode ends.
//   - Crossed and Crossings: whether / how many times a period counted in
//     global steps fires between two steps (with N envs the step moves by N).
//   - OU: Ornstein–Uhlenbeck exploration noise; AddGaussianNoise,
//     AddOUNoise: exploration around a deterministic action, scaled to the
//     action range and clipped to its bounds.
//   - Twin: the twin critics side by side (Fit, FitGrad); DPGGrad and
//     DPGStep: the deterministic policy gradient.
//   - NewCritics, PolyakAll, Mean: critic construction, target updates and
//     the logged Q means.
//   - Save, Load and Named: several networks in one safetensors file under
//     prefixes; BoxBounds: the finite bounds a tanh actor needs.
//   - LoadPolicy, LoadAgent, TrainFunc: the checkpoint and algo.Spec
//     plumbing; CheckEnv and Common: the Validate checks they share.
//
// Each algorithm keeps its own losses and updates (targets, critic and
// actor steps, entropy tuning) and its schedule in its Learner, in paper
// order; what lives here is plumbing, or an equation used unchanged by
// several algorithms.
//
// # How a Train composes the pieces (the local executor)
//
//	envs := offpolicy.MakeEnvs(id, N)
//	learner, rb := …newLearner(), …newReplay()
//	worker := offpolicy.NewEnvWorker(envs, policy on learner's live net, sampler, assembler)
//	worker.Reset(seed)
//	for worker.Steps < steps {
//		prev := worker.Steps
//		worker.Step(log)                 // act, step, assemble n-step transitions, log episodes
//		rb.Add(&worker.Transitions)
//		stats := learner.Learn(ctx, rb, prev, worker.Steps)  // the updates due
//		offpolicy.LogStats(log, stats)
//	}
//
// and the learner's target is r + Discount·(1−Done)·V(s'), which is the
// one-step target γ·(1−done) when n = 1. Replay keeps γ^m in an extra
// column of the stored next observation when n > 1, because replay.Batch
// has no per-row discount.
//
// # Costs and concurrency
//
// Nothing here allocates after construction (Replay: after its first
// Sample; Assembler and EnvWorker: once their transitions have grown to a
// step's largest) or starts goroutines (Twin uses the caller's
// twin.Pair). An NStep, Assembler and EnvWorker belong to one env worker, a
// Replay to the learner's goroutine.
package offpolicy
