// Package dqn is Deep Q-Learning (Mnih et al. 2015, "Human-level control
// through deep reinforcement learning") for discrete action spaces, written
// to read top to bottom like CleanRL's dqn.py, with the classic extensions
// as options: Double DQN, prioritized replay, n-step returns, Huber loss,
// Polyak target updates, RMSProp, and convolutional Q-networks for image
// observations (MinAtar's and Nature DQN's).
//
// # How it fits
//
// Spec() registers DQN with the CLI (algo/all). `herd train --config
// configs/dqn-cartpole.yaml` resolves a Config (CleanRL's defaults from
// NewConfig, overridden by the file and flags), calls Train with an
// algo.Runtime whose Logger is a metrics.Recorder, and saves the returned
// Agent (the Q-network, model.safetensors). LoadPolicy rebuilds the greedy
// policy for `herd eval`. DQN builds on env (vector envs with true final
// observations), replay (Uniform or Prioritized) and nn (MLP, ConvNet,
// Adam, RMSProp, losses, Q helpers), through the small adapters of algo/internal/offpolicy.
//
// # The loop (Train)
//
//	for each step:
//		ε ← linear schedule (1 → 0.05 over exploration_fraction of the run)
//		a ← random with probability ε, else argmax_a Q(s, a; θ)
//		s', r, terminated, truncated ← env.Step(a)
//		store (s, a, r, s'_true, terminated) through the n-step accumulator
//		s ← s'                                 // the hand-off (new episode's first obs)
//		if step > learning_starts:
//			for each multiple of train_frequency passed, gradient_steps times:
//				y ← r + γ^m (1 − terminated) max_a' Q(s'_true, a'; θ⁻)
//				θ ← Adam or RMSProp step on MSE or Huber(Q(s, a; θ), y), IS-weighted if prioritized
//				update priorities to |δ| + ε
//			for each multiple of target_network_frequency passed: θ⁻ ← τθ + (1 − τ)θ⁻
//
// # Pieces and the local executor
//
// Pieces (also Spec().Pieces) cuts DQN into the parts that executors place
// on different goroutines, processes or machines (see algo.Pieces and
// docs/ARCHITECTURE.md, "Off-policy pieces"): the policy (Q(s, ·; θ), one output per action), the
// sampler (ε-greedy at the step's ε), the assembler (n-step transitions per env, on the env
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
// # Implementation details
//
//  1. Termination vs truncation: the vector env resets an ended episode at
//     once; Batch.NextObsRow gives the true final observation, stored as s'.
//     Only terminated transitions drop the bootstrap (1 − terminated); a
//     time-limit truncation bootstraps from the true final state.
//  2. ε-greedy (offpolicy.LinearSchedule): per env, in row order, one
//     uniform draw decides between a random action and the greedy one. The
//     policy computes Q for every env (CleanRL runs it only for the envs
//     that exploit); the draws and the bits are the same, since rows are
//     independent of their batch.
//  3. Double DQN (Config.DoubleQ, van Hasselt et al. 2016): the online
//     network picks a* = argmax_a' Q(s', a'; θ), the target network values
//     it, Q(s', a*; θ⁻).
//  4. Prioritized replay (Config.Prioritized, Schaul et al. 2016):
//     replay.Prioritized samples ∝ p^α; the loss is weighted by the IS
//     weights (nn.WeightedMSE / nn.WeightedHuber); after each step the
//     sampled slots get priority |δ| + priority_eps, skipped by the buffer if
//     the slot was overwritten meanwhile (generations); β anneals linearly
//     from priority_beta to 1 over the run. With initial_priorities: actor
//     (Ape-X, Horgan et al. 2018) new transitions enter at |δ| +
//     priority_eps computed by the env worker with its Q-network copy
//     (Pieces' Prioritizer: that copy both acts and bootstraps, as an
//     actor holds no target network) instead of the running maximum.
//     In the flow executor's Ape-X plan (ApexPlan) each actor copies the
//     learner's newest weights every apex_sync_steps of its own env steps
//     (default 400: the paper's "every 400 frames"; herd counts env steps,
//     as CartPole has no frame skip), at item boundaries, and not after
//     every update; pal and dist set the same period with
//     runtime.refresh_every.
//  5. n-step returns (Config.NSteps, offpolicy.NStep): the stored reward is
//     Σ_{k<m} γ^k r_{t+k} and the bootstrap discount γ^m, m = n except at
//     episode ends, where the pending transitions are flushed with their
//     own shorter m.
//  6. Periods in global steps (offpolicy.Crossings): with N envs the step
//     advances by N per vector step, and training rounds and target
//     updates fire once per multiple of their period passed, so with 16
//     envs and train_frequency 4 a vector step trains 4 rounds: the replay
//     ratio (gradient_steps / train_frequency updates per env step) does
//     not depend on num_envs (TestOffPolicyReplayRatioIndependentOfNumEnvs).
//     Before the pieces a vector step trained at most one round, so
//     runs with num_envs > train_frequency trained less than documented
//     and now give other bits; runs with num_envs ≤ train_frequency (every
//     config in configs/) are unchanged. Env steps up to learning_starts
//     never train, also when a vector step straddles it.
//  7. Randomness: network init, exploration and replay sampling each have
//     their own stream from internal/rng (roles "dqn/init", "dqn/explore",
//     "dqn/replay"), and envs are seeded from the run seed, so the same seed
//     gives an identical metrics.csv (TestDeterministic).
//  8. Networks (Config.Encoder): "mlp" feeds the observation vector to the
//     net_arch ReLU layers. "minatar" and "nature" (nn.ConvPreset) put
//     convolutions with ReLU after each in front of them ("impala": IMPALA's
//     residual stages and a ReLU, nn.ImpalaStages), flattened, as
//     PyTorch's nn.Sequential (checkpoint tensors "0.weight", "0.bias",
//     "2.weight", …), for observations that are a Box of shape [H, W, C];
//     any other observation is refused when the config is checked. Envs
//     write images height × width × channels (MinAtar's state()) and
//     nn.Conv2d reads channels × height × width: the Q-network transposes
//     each observation as it enters the network (convQ.Forward), the one
//     place, so replay, the wire and every executor carry the env's
//     layout, as MinAtar's examples/dqn.py permutes in get_state. The
//     learner and its target network use the network through one small
//     interface (qNet), so target updates, weight versions and
//     checkpoints are the same for both kinds.
//  9. Optimizer (Config.Optimizer): "adam" (PyTorch's defaults, as
//     CleanRL) or "rmsprop", torch.optim.RMSprop with rmsprop_alpha,
//     rmsprop_eps and rmsprop_centered (nn.RMSProp, pinned against
//     PyTorch by nn's TestRMSPropMatchesPyTorch). configs/dqn-minatar-breakout.yaml
//     is MinAtar's examples/dqn.py: the minatar encoder with net_arch
//     [128], centered RMSProp (lr 2.5e-4, α 0.95, ε 0.01), Huber loss,
//     batch 32, replay 100k, target copy every 1000 steps, training every
//     step after 5000. Where herd departs: ε falls from step 0 over
//     exploration_fraction of the run, where examples/dqn.py starts its
//     100k-frame decay after the 5000 random frames, so ε reaches 0.1
//     5000 frames earlier.
//
// # Metrics
//
//   - losses/td_loss: the (weighted) TD loss of the last gradient step.
//   - losses/q_values: mean Q(s, a; θ) over the last minibatch; it should
//     rise towards the discounted return (≈ 1/(1−γ) = 100 on CartPole).
//   - charts/epsilon: the exploration rate.
//
// # Costs and concurrency
//
// A step costs one env step, and when exploiting one batch-1 forward pass;
// a training round costs one or two target/online forwards at batch B, one
// backward and an optimizer step over every parameter (figures in
// docs/BENCHMARKS.md). Train allocates its workspaces once and
// then nothing per step. It runs on the caller's goroutine, plus one
// worker goroutine (package twin, owned by the Learner) that computes the
// target network's forward pass beside the online network's and, for an
// MLP, the second layer's weight gradients beside the rest of the
// backward pass (nn.MLP.BackwardSplit); parallel: false keeps everything
// on the caller, with the same bits. Train stops it (Learner.Close)
// before it returns. Each job reads little that the caller wrote: the
// target forward reads the batch and its own weights, the dW job the
// layer's dZ (it recomputes the first layer's output itself). Adam and
// the other layers stay on the caller: handing the worker half of Adam's
// elements, or every layer's dW, moves activations, dZ and updated
// weights between cores, which costs more than the halves save
// (docs/BENCHMARKS.md "Kernels and overheads").
package dqn
