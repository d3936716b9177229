// Package sac is Soft Actor-Critic (Haarnoja et al. 2018, "Soft
// Actor-Critic Algorithms and Applications") for continuous (Box) action
// spaces, written to read top to bottom like CleanRL's
// sac_continuous_action.py: twin Q critics with Polyak-averaged targets, a
// tanh-squashed Gaussian policy, and automatic entropy tuning.
//
// # How it fits
//
// Spec() registers SAC with the CLI (algo/all); `herd train --config
// configs/sac-pendulum.yaml` trains it. Train returns an Agent (actor and
// both critics, saved as actor.*, qf1.*, qf2.* in model.safetensors);
// LoadPolicy rebuilds the deterministic policy tanh(μ(s))·scale + bias for
// `herd eval`. SAC builds on env, replay (Uniform) and nn (MLP, Critic,
// TanhGaussian, Adam, MSE, PolyakUpdate) through algo/internal/offpolicy.
//
// # The loop (Train)
//
//	for each step:
//		a ← uniform random before learning_starts, else ã ~ π(·|s)
//		store (s, a, r, s'_true, terminated); s ← s'
//		if step > learning_starts:
//			sample a minibatch
//			y ← r + γ(1 − terminated)(min_i Q'_i(s', ã') − α log π(ã'|s')),  ã' ~ π(·|s')
//			critics: Adam step on MSE(Q1(s, a), y) + MSE(Q2(s, a), y)
//			every policy_frequency steps, policy_frequency times:
//				actor: Adam step on E[α log π(ã|s) − min_i Q_i(s, ã)]   (reparameterised ã)
//				α: Adam step on −log α · E[log π(ã|s) + H̄],  H̄ = −dim(A)
//			every target_network_frequency steps: θ'_i ← τθ_i + (1 − τ)θ'_i
//
// # Pieces and the local executor
//
// Pieces (also Spec().Pieces) cuts SAC into the parts that executors place
// on different goroutines, processes or machines (see algo.Pieces and
// docs/ARCHITECTURE.md, "Off-policy pieces"): the policy (the actor's tanh-Gaussian parameters), the
// sampler (a tanh-Gaussian sample, uniform actions before learning_starts), the assembler (n-step transitions per env, on the env
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
//  1. Termination vs truncation: s' is Batch.NextObsRow, the true final
//     observation of an ended episode; only termination drops the
//     bootstrap.
//  2. The policy head is nn.TanhGaussian: log σ = −5 + 3.5(tanh(raw) + 1),
//     a = tanh(μ + σε)·scale + bias, with the tanh log-det correction in
//     log π (CleanRL's LOG_STD_MIN/MAX and action scaling).
//  3. The actor's gradient flows through the critic that gives the minimum
//     on each row (nn.Critic.Backward returns dQ/da), then through the
//     reparameterised sample (TanhGaussian.BackwardSample with dL/dlog π =
//     α/B). The critics' gradients this adds are discarded: they are zeroed
//     before the critics' next step.
//  4. Entropy tuning uses log π from the actor step's own sample (taken
//     before the actor moved), as Stable-Baselines3 does; CleanRL draws a
//     fresh sample after the actor step. The difference is one actor
//     forward pass per update and no measurable change in learning.
//  5. α starts at 1 (log α = 0) as in CleanRL and Stable-Baselines3; with
//     autotune off it is the fixed Config.Alpha.
//  6. Randomness: "sac/init" (weights), "sac/explore" (acting),
//     "sac/learner" (policy samples in updates), "sac/replay" (minibatches).
//
// # Metrics
//
// losses/qf1_values and losses/qf2_values (mean Q of the minibatch),
// losses/qf_loss (mean of the two critics' MSE), losses/actor_loss,
// losses/alpha and losses/alpha_loss, as in CleanRL.
//
// # Costs and concurrency
//
// One update costs an actor forward at B for the target, two target-critic
// forwards, two critic forward+backward passes, and (for the actor) an
// actor forward+backward plus two critic forward+backward passes; the
// Pendulum config's 64-64 networks keep it well under a millisecond. Train
// allocates its workspaces once and runs on the caller's goroutine, plus
// one worker goroutine (offpolicy.Twin over package twin) that computes Q2
// beside Q1 in every critic pass, with the same bits (parallel: false
// keeps everything on the caller); Train stops it before it returns.
package sac
