// Package ddpg is Deep Deterministic Policy Gradient (Lillicrap et al. 2016,
// "Continuous control with deep reinforcement learning") for continuous
// (Box) action spaces, written to read top to bottom like CleanRL's
// ddpg_continuous_action.py: a deterministic tanh actor, one Q critic,
// target copies of both moved by Polyak averaging, Gaussian exploration.
//
// # How it fits
//
// Spec() registers DDPG with the CLI (algo/all); `herd train --config
// configs/ddpg-pendulum.yaml` trains it. Train returns an Agent (actor and
// critic, saved as actor.* and qf1.*); LoadPolicy rebuilds μ(s) for
// `herd eval`.
//
// # The loop (Train)
//
//	for each step:
//		a ← uniform random before learning_starts,
//		    else clip(μ(s) + N(0, (exploration_noise·scale)²), low, high)
//		store (s, a, r, s'_true, terminated); s ← s'
//		if step > learning_starts:
//			y ← r + γ(1 − terminated) Q'(s', μ'(s'))
//			critic: Adam step on MSE(Q(s, a), y)
//			every policy_frequency critic updates:
//				actor: Adam step on −E[Q(s, μ(s))]
//				targets: θ' ← τθ + (1 − τ)θ'
//
// # Pieces and the local executor
//
// Pieces (also Spec().Pieces) cuts DDPG into the parts that executors place
// on different goroutines, processes or machines (see algo.Pieces and
// docs/ARCHITECTURE.md, "Off-policy pieces"): the policy (μ(s) in the env's units), the
// sampler (μ(s) plus Gaussian noise, uniform actions before learning_starts), the assembler (n-step transitions per env, on the env
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
//  1. Gaussian exploration noise instead of the paper's Ornstein–Uhlenbeck
//     process, as CleanRL and Stable-Baselines3's zoo do.
//  2. CleanRL's DDPG keeps TD3's policy delay (policy_frequency 2); set
//     policy_frequency: 1 for the original algorithm.
//  3. The deterministic policy gradient: nn.Critic.Backward returns dQ/da,
//     nn.TanhActor.Backward carries it through a = tanh(f(s))·scale + bias.
//  4. Termination vs truncation: s' is the true final observation; only
//     termination drops the bootstrap.
//  5. Randomness: "ddpg/init", "ddpg/explore", "ddpg/replay".
//
// # Metrics
//
// losses/qf1_values (mean Q of the minibatch), losses/qf1_loss and
// losses/actor_loss (−mean Q(s, μ(s))), as in CleanRL.
//
// # Costs and concurrency
//
// One update costs a target-actor and a target-critic forward and a critic
// forward+backward at batch B, plus every policy_frequency updates an actor
// forward+backward and a critic forward+backward. Train allocates its
// workspaces once and runs on the caller's goroutine, plus (parallel:
// true, the default) one worker goroutine (package twin) that computes the
// target networks' forward pass beside the critic's, with the same bits;
// Train stops it before it returns.
package ddpg
