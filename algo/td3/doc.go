// Package td3 is Twin Delayed DDPG (Fujimoto, van Hoof and Meger 2018,
// "Addressing Function Approximation Error in Actor-Critic Methods") for
// continuous (Box) action spaces, written to read top to bottom like
// CleanRL's td3_continuous_action.py.
//
// # How it fits
//
// Spec() registers TD3 with the CLI (algo/all); `herd train --config
// configs/td3-pendulum.yaml` trains it. Train returns an Agent (actor and
// both critics, saved as actor.*, qf1.*, qf2.*); LoadPolicy rebuilds the
// deterministic actor μ(s) for `herd eval`. TD3 builds on env, replay
// (Uniform) and nn (MLP, Critic, TanhActor, Adam, MSE, PolyakUpdate)
// through algo/internal/offpolicy.
//
// # The loop (Train)
//
//	for each step:
//		a ← uniform random before learning_starts,
//		    else clip(μ(s) + noise·scale, low, high),  noise ~ N(0, σ²) or OU(σ)
//		store (s, a, r, s'_true, terminated); s ← s'
//		if step > learning_starts:
//			ã' ← clip(μ'(s') + clip(N(0, policy_noise²), ±noise_clip)·scale, low, high)
//			y ← r + γ(1 − terminated) min(Q'_1(s', ã'), Q'_2(s', ã'))
//			critics: Adam step on MSE(Q1(s, a), y) + MSE(Q2(s, a), y)
//			every policy_frequency critic updates:
//				actor: Adam step on −E[Q1(s, μ(s))]
//				targets (actor and both critics): θ' ← τθ + (1 − τ)θ'
//
// # Pieces and the local executor
//
// Pieces (also Spec().Pieces) cuts TD3 into the parts that executors place
// on different goroutines, processes or machines (see algo.Pieces and
// docs/ARCHITECTURE.md, "Off-policy pieces"): the policy (μ(s) in the env's units), the
// sampler (μ(s) plus Gaussian or OU noise with per-env OU state, uniform actions before learning_starts), the assembler (n-step transitions per env, on the env
// worker), the replay memory and the Learner. Train is the local
// executor, their shortest composition:
//
//	for step < steps:
//		worker.Step: out ← policy(obs); a ← sampler(out, step); envs.Step(a); assemble transitions
//		replay.Add(transitions)
//		learner.Learn(replay, prev step, step)    // the updates due, once learning has started
//
// The env worker acts with the learner's live network (same goroutine, no
// copy): the loop before the pieces did the same, and it gives the same
// bits (algo/all TestOffPolicySameBitsAsBeforeThePieces). Another executor
// would publish learner.Weights() every k updates instead.
//
// An update is written once: Learn is Grad then Apply on the learner
// itself (offpolicy.Learn), in phases (algo.Phaser) — the critic step,
// then the actor's gradient at the critics that step left — which the
// pal and dist executors' several learners run too, averaging each
// phase's gradients before its apply (run/pal TestSameWeightsAsLearn).
//
// One update per env step: with num_envs N a vector step takes N updates
// (each on its own minibatch, with the delays counted in env steps as with
// one env), so the replay ratio does not depend on num_envs. Before the
// pieces it took one; runs with num_envs 1 (every config in
// configs/) are unchanged bit for bit.
//
// # Implementation details
//
//  1. Clipped double-Q learning: the target takes the minimum of the two
//     target critics (eq. 10 of the paper).
//  2. Target policy smoothing: clipped Gaussian noise on the target action,
//     in units of the action scale, then clipped to the bounds (eq. 14).
//  3. Delayed policy updates: the actor and all three targets move once per
//     policy_frequency critic updates (§5.2).
//  4. The deterministic policy gradient flows through Q1 only
//     (nn.Critic.Backward returns dQ/da, TanhActor.Backward carries it into
//     the actor); the critic gradients this adds are zeroed before the
//     critics' next step.
//  5. Termination vs truncation as in every herd algorithm: s' is the true
//     final observation; only termination drops the bootstrap.
//  6. Exploration noise is Gaussian by default (CleanRL); noise_type: ou
//     switches to Ornstein–Uhlenbeck noise (offpolicy.OU, reset at each
//     episode end), whose correlated pushes explore sparse-reward tasks
//     such as MountainCarContinuous (configs/td3-mountaincarcontinuous.yaml).
//  7. Randomness: "td3/init", "td3/explore" (exploration noise and warm-up
//     actions), "td3/learner" (smoothing noise), "td3/replay".
//
// # Metrics
//
// losses/qf1_values, losses/qf2_values, losses/qf_loss (mean of the two
// critics' MSE) and losses/actor_loss (−mean Q1(s, μ(s))), as in CleanRL.
//
// # Costs and concurrency
//
// One update costs a target-actor forward, two target-critic forwards and
// two critic forward+backward passes at batch B, plus every other update an
// actor forward+backward and a Q1 forward+backward. Train allocates its
// workspaces once and runs on the caller's goroutine, plus one worker
// goroutine (offpolicy.Twin over package twin) that computes Q2 beside Q1
// in the critic passes, with the same bits (parallel: false keeps
// everything on the caller); Train stops it before it returns.
package td3
