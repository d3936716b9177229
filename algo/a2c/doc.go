// Package a2c is synchronous Advantage Actor-Critic (Mnih et al. 2016) in
// Stable-Baselines3's form: one file, a2c.go — Config, Pieces (policy,
// sampler, learner; the policy and sampler are onpolicy's, shared with
// PPO), Train (the local executor, onpolicy.TrainLocal), Learn.
//
// # Running it
//
//	herd train --config configs/a2c-cartpole.yaml   # rl-baselines3-zoo setting
//
// # The loop (Train)
//
// Per update: collect num_steps steps of num_envs envs with the policy and
// the sampler (algo.SegmentWorker, which bootstraps truncated episodes
// from their final observation), then learner.Learn on the segment:
// compute advantages with GAE(γ, λ) — λ = 1 by default, i.e. n-step returns
// minus V — and take ONE gradient step on the whole rollout:
//
//	L = −mean(Â·log π(a|s)) − c_ent·mean(H) + c_vf·mean((R − V(s))²)
//
// with the global gradient norm clipped to max_grad_norm and RMSprop
// (α 0.99, ε 1e-5, SB3's defaults) or Adam. Unlike PPO there is no ratio,
// no clipping and no minibatching: the data is used once, on-policy.
//
// # Metrics
//
// charts/learning_rate; losses/value_loss (the mean squared error, without
// the ½ CleanRL's PPO uses), losses/policy_loss, losses/entropy,
// losses/explained_variance.
//
// # Costs and concurrency
//
// Per update: num_envs × num_steps env steps with a forward of actor and
// critic each, and one forward + backward of both on the batch (run on two
// goroutines with parallel: true, with identical results). The policy
// reads the learner's parameters in place (onpolicy.Policy.Follow): a
// snapshot per update would cost A2C ~10% of its time. Acting and the
// update allocate nothing in steady state (the scalars come in a new
// slice per update). The same seed trains the same bits as the loop before the pieces
// (TestA2CSameBitsAsBefore, testdata/bits.txt).
package a2c
