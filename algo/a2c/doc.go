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
// the sampler (rollout.Segments, which bootstraps truncated episodes
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
// # Under the HTS executor: the delayed gradient
//
// Under run/hts the segment learned by update k was gathered with the
// previous weights θ_{k−1} (a lag of one version, seg.Version). A2C then
// uses HTS-RL's delayed gradient (Eq. 6): the learner keeps a copy of
// θ_{k−1}, evaluates the loss above and its gradient there, and applies
// that gradient to θ_k with θ_k's optimizer state (TestDelayedGradient
// checks it bit for bit). It reads no behaviour log-probabilities.
// delayed_gradient: false evaluates the gradient at θ_k instead (Eq. 5,
// the stale-policy gradient). Without a lag (the local executor) the two
// are the same update. A lag of more than one version (the dist executor
// can deliver older segments) falls back to the gradient at θ_k.
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
