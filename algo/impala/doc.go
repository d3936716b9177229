// Package impala is IMPALA (Espeholt et al. 2018, "IMPALA: Scalable
// Distributed Deep-RL with Importance Weighted Actor-Learner
// Architectures") for MLP policies, with an optional LSTM or GRU core
// (the recurrent: section), written as a dataflow plan:
// Config.AsyncPlan declares it and package flow builds it (flow.AsyncPlan);
// VTrace is its off-policy correction. The package holds the config, the
// pieces and the update; it imports no executor.
//
// # Running it
//
//	herd train --algo impala --env CartPole-v1 --steps 500000
//
// The local and flow executors run the plan (flow: workers in-process or
// over NATS, herd launch). IMPALA also declares a segment learner, so the
// HTS executor (segments with one update of lag) and the dist executor
// (env and policy workers, the learner taking segments as they come, lag
// bounded by runtime.max_policy_lag) place the V-trace learner on their own
// segments; num_async and max_policy_lag are the plan's, and those
// executors refuse them away from their defaults (algo.PlanSettings):
//
//	herd train --algo impala --env CartPole-v1 --set runtime.executor=dist
//
// # The plan
//
//	segments, err := flow.GatherAsyncLag(flow.ParallelRollouts(workers), num_async, max_policy_lag)
//	trained := flow.ForEach(segments, flow.TrainOneStep(workers, learner))
//
// Actors (workers) step their envs with their own policy copy and record
// the behaviour log-probabilities log μ(a|x) of every action; each keeps
// num_async segments in flight, so actors act while the learner learns.
// The learner takes one step per segment as they arrive and broadcasts
// its weights, which each worker uses from its next requested segment
// on; so a segment is learned after the updates on the segments taken
// since it was requested. max_policy_lag bounds that count (default 0:
// the least bound, num_async × env_workers − 1, under which segments are
// learned in the order they were requested; a larger one lets a fast
// worker's segments pass a slow one's): with 4 workers and num_async 2,
// up to 7 versions, not num_async.
//
// # The update (learner.Learn)
//
//  1. log ρ_t = log π(a_t|x_t) − log μ(a_t|x_t) under the current actor;
//  2. V-trace targets v_s and advantages A_s = ρ_s(r_s + γ v_{s+1} − V(x_s))
//     (VTrace: eq. 1 with ρ̄ = rho_bar, c̄ = c_bar and the traces
//     c_t = λ·min(c̄, π/μ) of the paper's Remark 2, λ = lambda, 1 by
//     default; cut at episode ends);
//  3. L = −mean(A·log π) − c_ent·mean(H) + c_vf·½·mean((v − V)²), one
//     gradient step (clipped global norm; Adam, or RMSprop as the paper).
//
// # A recurrent core
//
// With recurrent: {type: lstm} (or gru) each network has a core between
// its hidden layers and its head, as PPO-LSTM's (docs/guide/recurrent.md).
// The actors keep each env's state, zero it where an episode ends and
// record each segment's starting states (sample.Segment.State); step 1
// re-runs every env's sequence from its recorded state, zeroing it after
// each done (onpolicy.EpisodeStarts), and takes V(x_T) from the state the
// last step left (Agent.ValueAfter); steps 2 and 3 are unchanged, the
// gradient flowing back through the whole segment (truncated BPTT).
//
// # Departures from the paper
//
// Means instead of sums over the batch (so max_grad_norm 0.5 rather than
// the paper's 40); no learner-side queue or batching of several segments
// (one step per segment); truncated episodes (CartPole's 500-step limit)
// are bootstrapped, not cut: the worker folds γ·V(final observation) of
// the behaviour critic into the reward, as herd's PPO and A2C; separate
// actor and critic networks (no shared torso; a recurrent core per
// network reading the observation alone, not the previous action and
// reward as the paper's LSTM does); the policy lag is
// bounded (max_policy_lag: the learner waits for a slow worker's segment
// rather than let it fall further behind), where the paper's learner takes
// whatever its queue holds. configs/impala-cartpole
// unrolls 5 steps, not the paper's 20: with c̄ = 1 the targets are up to
// T-step returns, and a CartPole critic, which cannot see the time left,
// is nearly constant, so at T = 32 a segment's advantages mostly say
// whether an episode ended in it (−70 on each of its last steps) and 1–3
// runs in 10 stalled near 200; at T = 5 they did not (docs/BENCHMARKS.md).
//
// # Metrics
//
// charts/learning_rate, losses/value_loss, losses/policy_loss,
// losses/entropy; losses/mean_rho, the mean truncated importance weight
// min(ρ̄, π/μ) (1 when on-policy); charts/policy_lag, the versions the
// learner had taken since the segment's policy, and charts/policy_lag_max,
// the largest so far (summary.json's policy_lag_max), never above
// max_policy_lag.
package impala
