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
//   - Collector: the continuous-action env loop of SAC, TD3 and DDPG (N
//     synchronous envs, uniform actions before learning starts, step,
//     replay store with the true final observation on truncation, episode
//     logging, the obs hand-off) and its one-step Replay.
//   - AddGaussianNoise, AddOUNoise: exploration around a deterministic
//     action, scaled to the action range and clipped to its bounds.
//   - NewCritics, PolyakAll, Mean: critic construction, target updates and
//     the logged Q means.
//   - LoadPolicy, LoadAgent, TrainFunc: the checkpoint and algo.Spec
//     plumbing; CheckEnv and Common: the Validate checks they share.
//
// Each algorithm keeps its own losses and updates (targets, critic and
// actor steps, entropy tuning) in its file, in paper order; what lives here
// is plumbing, or an equation used unchanged by several algorithms.
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
// # How an algorithm drives Collector
//
//	col, _ := offpolicy.NewCollector(env, N, bufferSize, gamma)
//	col.Reset(seed)
//	for col.Steps < steps {
//		if col.Steps < learningStarts {
//			col.RandomActions(exploreRNG)
//		} else {
//			… write the policy's actions into col.Actions …
//		}
//		col.Step(log) // store, log episodes, obs hand-off
//		if col.Steps > learningStarts && col.Replay.Len() >= B {
//			col.Replay.Sample(B, sampleRNG)
//			… the algorithm's updates …
//		}
//	}
//
// # Costs and concurrency
//
// Nothing here allocates after construction (Replay: after its first
// Sample) or starts goroutines. An NStep belongs to one environment, a
// Replay to the learner's goroutine.
package offpolicy
