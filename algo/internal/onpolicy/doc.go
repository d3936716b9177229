// Package onpolicy holds what PPO and A2C share, so that each algorithm's
// file keeps only its learner and loss: the pieces (Policy, Sampler, the
// Learner base), the local executor (TrainLocal), the actor-critic Agent the
// learner trains, and the advantage math (GAE, returns, normalisation,
// explained variance).
//
// # The pieces
//
//   - Policy (algo.PolicyNet): actor and critic forward, rows
//     [logits | V(s)] or [μ | log σ | V(s)]; SetWeights points its
//     parameters at an immutable weights.Version (no copy).
//   - Sampler (algo.Sampler): draws the actions from a row with the env
//     worker's stream (one uniform per row, or d normals), log π and V(s),
//     and the env actions (Discrete start added, Box clipped).
//   - Learner: the trained Agent, its optimizer, the GAE buffers and the
//     version count. PPO and A2C embed it; their Learn calls Begin (checks
//     the segment, GAE) and then runs their own update.
//   - NewPieces assembles these into algo.Pieces; Spec.Pieces of ppo and
//     a2c call it.
//
// # The driving loop (TrainLocal, the local executor)
//
//	worker := algo.NewSegmentWorker(0, envs, policy, sampler, γ)
//	worker.Reset(envSeed)
//	for iteration := 1; iteration <= numIterations; iteration++ {
//		worker.Collect(seg)                   // T steps, truncation bootstrapped
//		globalStep = algo.LogEpisodes(rt.Log, seg, globalStep)
//		stats, _ := learner.Learn(ctx, seg)   // Begin (GAE), the algorithm's update
//		policy.SetWeights(learner.Weights())  // the next rollout acts with them
//		// log stats, rt.Log.Step(globalStep)
//	}
//
// Inside a learner's update, per minibatch:
//
//	agent.Learn(obs, actions, B, policyLoss, valueLoss) // forward, loss halves, backward (grads zeroed first)
//	nn.ClipGradNorm(agent.Params(), maxNorm)
//	opt.Step(agent.Params())
//
// policyLoss gets log π(a|s) and H per row and writes dL/dlog π and dL/dH;
// valueLoss gets V(s) and writes dL/dV. (Evaluate + Backward do the same in
// two calls, for code that needs the outputs of both networks at once.)
//
// # Departures from nn, and why
//
// The agent's networks (net) are stacks of single-layer nn.MLPs with the
// hidden activation applied here: nn's Tanh calls float64 math.Tanh per
// element, which was 60% of PPO's CartPole time; tanhTo, a float32
// piecewise-cubic Hermite interpolant accurate to two ulps, is ~20x faster.
// On amd64 with AVX2, tanhTo and tanh's backward run 8 lanes at a time in
// assembly (tanh_amd64.s; ~4x and ~6x the Go loops). Why assembly: they
// were still ~40% of PPO's CPU after the interpolant, and the Go compiler
// does not vectorise. Why no FMA: the kernels must give the bits of the Go
// loops, which Go compiles at GOAMD64=v1 to a separate multiply and add,
// each rounded. A fused multiply-add rounds once and changes the last bit,
// so the kernels use VMULPS then VADDPS in the Go order, and every
// determinism fixture stays as it was. TestTanhAsmMatchesGo checks all 2³²
// inputs with -tanh.all. Without AVX2, and for the len % 8 tail, the Go
// loops run.
// GEMMs, init, optimizers and checkpoint naming are nn's, and TestNetMatchesMLP
// checks that outputs and gradients equal nn.MLP's.
//
// # Concurrency
//
// With AgentConfig.Parallel the agent owns one worker goroutine (a
// twin.Pair, which hands off by polling rather than parking) that
// computes the critic's half of Learn (forward, valueLoss, backward) while
// the caller computes the actor's — one hand-off per minibatch; Close stops
// it and waits. Results are identical with and without it, because
// each network is computed by exactly one goroutine in a fixed order and the
// two meet only at gradient clipping, after both are done. Otherwise an
// Agent is used by one goroutine; so are a Policy and a Sampler (one per
// policy worker and env worker). The learner's Close stops the worker.
package onpolicy
