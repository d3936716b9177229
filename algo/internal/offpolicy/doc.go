// Package offpolicy holds the small pieces of math that herd's off-policy
// algorithms (algo/dqn, algo/sac, algo/td3, algo/ddpg) share, so that each
// algorithm file reads top to bottom like CleanRL's scripts while the
// shared equations live, tested once, here.
//
// # What is here
//
//   - LinearSchedule: CleanRL's linear_schedule, used for DQN's ε.
//   - NStep: turns one environment's one-step transitions into n-step
//     transitions with their own discount γ^m, handling termination (no
//     bootstrap) and truncation (bootstrap from the true final observation)
//     at episode ends.
//   - Polyak: the soft target update θ' ← τθ + (1−τ)θ' on flat parameter
//     slices, for networks whose parameters are exposed as []float32.
//
// # How an algorithm drives NStep
//
//	nstep := offpolicy.NewNStep(cfg.NSteps, cfg.Gamma, obsDim, actDim)
//	for step := range cfg.Steps {
//		… act, step the env …
//		nstep.Push(obs, action, reward, realNextObs, terminated, truncated)
//		for nstep.Pop(&tr) {
//			buffer.Add(tr.Obs, tr.Action, tr.Reward, tr.NextObs, tr.Discount, tr.Done)
//		}
//		obs = nextObs // the easy-to-miss hand-off (CleanRL dqn.py)
//	}
//
// and the learner's target becomes r + Discount·(1−Done)·V(s'), which is
// the one-step target γ·(1−done) when n = 1.
//
// # Costs and concurrency
//
// Nothing here allocates after construction or starts goroutines. An NStep
// belongs to one environment and one goroutine.
package offpolicy
