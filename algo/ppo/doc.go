// Package ppo is Proximal Policy Optimization (Schulman et al. 2017) with
// the clipped surrogate objective, in the shape of CleanRL's ppo.py and
// ppo_continuous_action.py: one file, ppo.go, read top to bottom — Config,
// Pieces (policy, sampler, learner), Train, Learn.
//
// # Running it
//
//	herd train --config configs/ppo-cartpole.yaml          # CleanRL defaults
//	herd train --algo ppo --env Acrobot-v1 --steps 500000
//
// or from Go (examples/train):
//
//	cfg := ppo.DefaultConfig()
//	agent, err := ppo.Train(ctx, &algo.Runtime{Header: h, Log: rec}, &cfg)
//
// # The pieces
//
// Pieces (Spec.Pieces) cuts PPO into what the executors place apart: the
// policy (actor and critic forward, rows [logits or μ, log σ | V(s)]) and
// the sampler (actions, log-probs, values from a row with the env worker's
// stream) are onpolicy's, shared with A2C; the learner is this package's
// (learner.Learn: steps 1 and 3–5 below on one sample.Segment, then a new
// weight version).
//
// # The loop (Train, the local executor)
//
// Sizes (batch = num_envs × num_steps, minibatch = batch / num_minibatches,
// iterations = steps / batch), seeds (one internal/rng stream per role:
// ppo/init, ppo/actor, ppo/minibatch, ppo/env), envs (env.MakeVector with
// episode statistics), the pieces, Adam (ε 1e-5), then per iteration
// (onpolicy.TrainLocal):
//
//  1. anneal the learning rate: lr·(1 − (iteration−1)/iterations)
//     (nn.LinearSchedule);
//  2. roll out num_steps steps of every env with the policy and the
//     sampler (rollout.Segments.Collect);
//  3. bootstrap and compute advantages with GAE(γ, λ) (onpolicy.GAE);
//  4. for update_epochs epochs, shuffle the batch and for each minibatch
//     compute the loss and its gradient (update: the policy half,
//     losses.policyLoss, and the value half, losses.valueLoss, through
//     Agent.Learn), clip the global gradient norm to max_grad_norm
//     (nn.ClipGradNorm) and step Adam;
//  5. stop the epochs early if target_kl > 0 and the approximate KL of the
//     last minibatch exceeds it;
//  6. log (the policy follows the learner's parameters, so the next
//     rollout acts with the new weights).
//
// # Implementation details (numbered as in CleanRL's PPO write-up)
//
//  1. Vectorised envs, autoreset in the same step (env.Vector).
//  2. Orthogonal init, gains √2 hidden, 0.01 policy head, 1 value head,
//     biases 0 (onpolicy.AgentConfig.OrthoInit).
//  3. Adam ε = 1e-5 (Config.AdamEps).
//  4. Learning-rate annealing (Config.AnnealLR).
//  5. GAE with λ (onpolicy.GAE).
//  6. Minibatch updates over shuffled indices (learner.Learn,
//     minibatch.gather).
//  7. Advantage normalisation per minibatch, unbiased std
//     (onpolicy.NormalizeTo).
//  8. Clipped surrogate objective (losses.policyLoss).
//  9. Value-loss clipping (losses.valueLoss, Config.ClipVLoss).
//  10. Entropy bonus (losses.policyLoss, Config.EntCoef).
//  11. Global gradient clipping (nn.ClipGradNorm).
//  12. Truncation is not termination: a time-limited episode's last reward
//     gets γ·V(true final observation) (rollout.Segments.Collect) — an
//     improvement over ppo.py, which treats both the same.
//  13. Continuous actions: a diagonal Gaussian with a state-independent
//     log-std ("actor_logstd"); the env receives the sample clipped to the
//     bounds, the buffer keeps the raw sample (ppo_continuous_action.py).
//     CleanRL's observation and reward normalisation wrappers are not
//     applied.
//
// # Metrics
//
// charts/learning_rate; losses/value_loss, losses/policy_loss,
// losses/entropy, losses/old_approx_kl, losses/approx_kl (the last
// minibatch's, as CleanRL logs them); losses/clipfrac (the fraction of
// samples whose ratio left [1−ε, 1+ε], averaged over all minibatches);
// losses/explained_variance of the rollout's values against its returns.
//
// # Under the HTS executor: two estimators
//
// Under run/hts the segment learned by update k was gathered with θ_{k−1}
// while the learner holds θ_k. By default (delayed_gradient: true) PPO
// uses HTS-RL's delayed gradient (Eq. 6): each minibatch gradient is
// evaluated at θ_{k−1} moved by the optimizer steps the update has taken
// so far (θ_{k−1} itself for the first minibatch;
// TestDelayedGradientOption) and applied to θ_k with θ_k's Adam state.
// With delayed_gradient: false it evaluates its clipped surrogate at θ_k
// with the ratio against the behaviour log-probabilities recorded with
// each action, correcting the lag by importance sampling, as the HTS-RL
// authors' released learner does. On CartPole under HTS the delayed form
// reached 500 in 5 of 5 seeds and the ratio form in 4 of 5, so the
// delayed form is the default. Without a lag (the local executor) both
// are plain PPO.
//
// # PPO-LSTM and PPO-GRU
//
// With recurrent: {type: lstm or gru, hidden: H, after: [...]}
// (configs/ppo-lstm-cartpolenovel.yaml, docs/guide/recurrent.md) the actor
// and the critic are each hidden layers → LSTM(H) or GRU(H) → after
// layers → head (onpolicy.AgentConfig.Recurrent), following CleanRL's
// ppo_atari_lstm.py: the policy carries its state per env and zeroes it
// where an episode ends; each segment records the states its envs began
// from (sample.Segment.State); each minibatch is num_envs /
// num_minibatches whole env sequences (envsperbatch), re-run from the
// stored states with the state zeroed after every done, gradients through
// all num_steps steps. TestRecurrentReplayMatchesActing pins that the
// learner's re-run gives the acting log-probabilities and values;
// TestRecurrentLossGradient checks the loss gradient against finite
// differences. The local executor keeps the per-env state, HTS's policy
// workers share it, dist carries it in its inference requests and flow's
// rollout workers keep their own envs' states, which SyncPlan joins with
// the segments; the executors that need a stateless policy refuse such a
// config (Config.Lacks).
//
// # Normalization (SB3 VecNormalize)
//
// norm_obs normalizes observations by their running mean and variance
// where they enter the networks; norm_reward divides the rewards by the
// running std of the discounted return, applied as a scale of the critic
// (onpolicy.ObsNorm, onpolicy.RewardNorm); anneal_clip anneals clip_coef
// with the learning rate (rl-zoo's lin_ schedules). The learner folds
// each segment into the statistics after its update (Learner.Fold), so
// the update sees the segment as the acting weights did; the statistics
// are parameters and travel with the weights. TestRMSUpdateIsPooledMoments,
// TestRewardNormIsVecNormalize, TestRewardNormAdvantages and
// TestRewardNormValueLoss pin the equations.
//
// # MAPPO
//
// MAPPO (Yu et al. 2022) is PPO on a multi-agent env's rows with a
// centralized critic: rows that end in the global state (an id with
// state=true) and actor_obs set to the agent's own part of a row (checked
// against the env's row layout, onpolicy.CheckActorObs), plus the
// paper's settings: value_norm (the authors' ValueNorm, running mean and
// std of the targets, onpolicy.ValueNorm), huber_delta (Huber value loss;
// the paper's 10) and input_norm (a LayerNorm of each network's input).
// With value_norm the value clip and loss are taken in the critic's
// normalized space as the authors' cal_value_loss takes them
// (TestMAPPOValueLoss); the old values are taken there with the
// learner's statistics at the start of the update, those the segment was
// gathered with under the local executor (under a lagged one, those of
// one update later). value_norm is refused with
// data-parallel learners (each would keep its own statistics); under a
// lagged executor the statistics are the newest, not moved back with the
// weights. TestIPPOAndMAPPOLearnSpread is a short learning check.
//
// # Costs and concurrency
//
// Each step costs one actor and one critic forward at batch num_envs; each
// iteration update_epochs × batch rows of forward and backward through both.
// With parallel: true (the default) the actor's and the critic's halves of
// each minibatch run on two goroutines (one hand-off per minibatch, the
// agent owns the second goroutine); the results are bit-identical to
// parallel: false. In the local executor the policy reads the learner's
// parameters in place (onpolicy.Policy.Follow), so no weights are copied
// per iteration; acting and the minibatch updates allocate nothing in
// steady state (the learner returns its scalars in a new slice per
// iteration). The same seed gives the
// same metrics.csv and weights (TestPPODeterministic), and the same as the
// loop before the pieces (TestPPOSameBitsAsBefore, testdata/bits.txt).
package ppo
