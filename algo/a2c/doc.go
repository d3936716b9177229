// Package a2c is synchronous Advantage Actor-Critic (Mnih et al. 2016) in
// Stable-Baselines3's form: one file, a2c.go — Config, Agent, Train.
//
// # Running it
//
//	herd train --config configs/a2c-cartpole.yaml   # rl-baselines3-zoo setting
//
// # The loop (Train)
//
// Per update: collect num_steps steps of num_envs envs (onpolicy.Rollout,
// which bootstraps truncated episodes from their final observation),
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
// goroutines with parallel: true, with identical results). No allocation
// in steady state.
package a2c
