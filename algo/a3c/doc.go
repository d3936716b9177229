// Package a3c is Asynchronous Advantage Actor-Critic (Mnih et al. 2016,
// "Asynchronous Methods for Deep Reinforcement Learning") written as a
// dataflow plan: Config.AsyncPlan declares it, and package flow builds it
// (flow.AsyncPlan) for the local and flow executors. The package holds the
// config and A2C's pieces; it imports no executor.
//
// # Running it
//
//	herd train --algo a3c --env CartPole-v1 --steps 500000 --set runtime.executor=flow --set runtime.env_workers=4
//
// # The plan
//
//	grads, err := flow.GatherAsyncLag(flow.ParForEach(flow.ParallelRollouts(workers), flow.ComputeGradients(workers)), 1, max_policy_lag)
//	applied := flow.ForEach(grads, flow.ApplyGradients(workers, learner))
//
// Each worker steps its share of num_envs envs for num_steps steps, then —
// on its own goroutine, with its own copy of the learner at the weights it
// acted with — computes the gradient of A2C's loss (package a2c:
// −mean(Â·log π) − c_ent·mean(H) + c_vf·mean((R − V)²), n-step returns, the
// global norm clipped per worker). The driver applies gradients one at a
// time, as they arrive, with one RMSprop (or Adam), and sends the new
// weights to the worker whose gradient it applied; that worker's next
// segment uses them. Other workers keep computing on older weights
// meanwhile: that staleness is A3C's asynchrony. It is bounded: no
// gradient is applied more than max_policy_lag updates after the weights
// it was computed at (default 0: the least bound, env_workers − 1, under
// which gradients are applied in the order their segments were asked
// for; a larger one lets a fast worker's gradients pass a slow one's).
//
// # Departures from the paper
//
// The paper's threads apply their gradients to shared parameters without
// locks (Hogwild); here one learner applies them in arrival order, which
// is what RLlib's A3C does and keeps every update whole. The paper's
// shared RMSprop statistics are the driver's one optimizer. Each worker
// steps several envs (num_envs / env_workers) per segment rather than one.
// Learning-rate annealing is not offered (its horizon would count A2C
// iterations). The staleness is bounded (max_policy_lag), where the
// paper's threads are not.
//
// # Metrics
//
// A2C's: charts/learning_rate, losses/value_loss, losses/policy_loss,
// losses/entropy, of the worker gradient just applied; and
// charts/policy_lag, the updates the driver had applied since the weights
// that gradient was computed at (A3C's staleness), and
// charts/policy_lag_max, the largest so far (summary.json's
// policy_lag_max), never above max_policy_lag.
package a3c
