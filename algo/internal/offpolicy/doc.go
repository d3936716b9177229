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
//   - Crossed: whether a period counted in global steps fires between two
//     steps (with N envs the step moves by N).
//   - Replay: n-step accumulators, a replay.Uniform or replay.Prioritized
//     buffer, flat minibatches with per-row discount and (1 − done), and
//     priority updates from TD errors.
//   - OU: Ornstein–Uhlenbeck exploration noise.
//   - Save, Load and Named: several networks in one safetensors file under
//     prefixes; BoxBounds: the finite bounds a tanh actor needs.
//
// # How an algorithm drives NStep
//
//	nstep := offpolicy.NewNStep(cfg.NSteps, cfg.Gamma, obsDim, actDim)
//	for step := range cfg.Steps {
//		… act, step the env …
//		nstep.Push(obs, action, reward, realNextObs, terminated, truncated)
//		for nstep.Pop(&tr) {
//			… copy tr into a replay.Batch row and Add it …
//		}
//		obs = nextObs // the easy-to-miss hand-off (CleanRL dqn.py)
//	}
//
// and the learner's target becomes r + Discount·(1−Done)·V(s'), which is
// the one-step target γ·(1−done) when n = 1.
//
// Replay does exactly this for every env (Replay.Store), and keeps γ^m in
// an extra column of the stored next observation, because replay.Batch has
// no per-row discount.
//
// # Costs and concurrency
//
// Nothing here allocates after construction (Replay: after its first
// Sample) or starts goroutines. An NStep belongs to one environment, a
// Replay to the learner's goroutine.
package offpolicy
