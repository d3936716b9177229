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
//	worker := rollout.NewSegments(0, envs, rollout.NewInline(policy, sampler), γ)
//	worker.Reset(envSeed)
//	for iteration := 1; iteration <= numIterations; iteration++ {
//		worker.Collect(seg)                   // T steps, truncation bootstrapped
//		globalStep = rollout.LogEpisodes(rt.Log, seg, globalStep)
//		stats, _ := learner.Learn(ctx, seg)   // Begin (GAE), the algorithm's update
//		policy.SetWeights(learner.Weights())  // the next rollout acts with them
//		// log stats, rt.Log.Step(globalStep)
//		// checkpoint when rt.Checkpoints says one is due
//	}
//
// With rt.Checkpoints set (algo.TrainRun, for `herd train`), the loop saves
// its whole state at iteration boundaries — every checkpoint_every steps,
// when ctx is cancelled and at the end — and a resumed run restores it
// before the first iteration (resume.go: the parameters, the optimizer's
// state, the Learn count and the algorithm's own LearnerState, the
// sampler's stream, each env's env.MarshalChain, the loop's counters and
// next observations, a recurrent policy's state per env), so that it
// continues bit for bit. A cancellation
// then lets the iteration under way finish its update, so that the
// interrupted run's checkpoint is at a boundary. Envs whose state cannot
// be saved turn the checkpoints off (Checkpoints.Disable).
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
// hidden activation applied here: tanhTo, a float32 piecewise-cubic
// Hermite interpolant accurate to two ulps, replaced float64 math.Tanh
// (once most of PPO's CartPole profile), and every determinism fixture
// holds its bits (nn's own tanh, a Padé approximant, rounds differently).
// On amd64, tanhTo and tanh's backward run 16 lanes at a time with
// AVX-512 (tanh512_amd64.s) and 8 with AVX2 (tanh_amd64.s). Why assembly:
// they were still ~40% of PPO's CPU after the interpolant, and the Go
// compiler does not vectorise. Why no FMA: the kernels must give the bits of the Go
// loops, which Go compiles at GOAMD64=v1 to a separate multiply and add,
// each rounded. A fused multiply-add rounds once and changes the last bit,
// so the kernels use VMULPS then VADDPS in the Go order, and every
// determinism fixture stays as it was. TestTanhAsmMatchesGo checks all 2³²
// inputs with -tanh.all. Without AVX2, and for the len % 8 tail, the Go
// loops run. Each activation is written into the next layer's input
// buffer (nn.MLP.Input), so no layer copies its input.
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
//
// # PPO and A2C: design notes
//
// # PPO and A2C
//
// `ppo.go` follows CleanRL's `ppo.py` top to bottom (sizes, seeds, envs, agent and
// optimizer; then per iteration: anneal LR, rollout, GAE, epochs of shuffled
// minibatches with clipped surrogate, clipped value loss, entropy bonus, global
// grad-norm clip, Adam; optional KL early stop; log). The loss gradient is written
// out per row (`update`) and pushed through nn's Categorical / DiagGaussian
// backward. `a2c.go` is SB3's A2C (one RMSprop step per 5-step rollout, λ = 1,
// unhalved MSE value loss). Both share `onpolicy.Agent` (separate actor and critic
// MLPs, PyTorch/CleanRL parameter names `actor.0.weight` … `actor_logstd`) and
// the pieces (see "Algorithm pieces" below).
//
// Zoo configs map SB3's hyperparameters onto this PPO. One trap: SB3's value loss is
// the plain MSE, CleanRL's (and herd's) is ½·MSE, so SB3's `vf_coef: 0.5` is herd's
// `vf_coef: 1.0` (`configs/ppo-lunarlander.yaml`; on LunarLander seed 1 the greedy
// policy scored 231 with 0.5 and 251 with 1.0).
//
// `TrainRun` (and `herd train --eval-episodes N`, `herd bench learn --eval-episodes N`)
// can evaluate the greedy policy after training (`algo.Evaluate`, episodes seeded from
// the run seed) and record it in summary.json next to the training-episode statistic,
// because the two differ: the zoo reports greedy returns, CleanRL training returns.
//
// Departure from CleanRL (on purpose): truncation is not termination. When a
// time limit ends an episode, `rollout.Segments.Collect` adds γ·V(true final observation,
// from `Batch.FinalObsRow`) to its last reward before GAE (Pardo et al. 2018; SB3
// does the same); `ppo.py` treats a truncation as a termination.
//
// # Departures, and why
//
//  1. `onpolicy.net` instead of `nn.MLP` for the actor and critic. A profile of PPO on
//     CartPole (`herd train --cpuprofile`) with nn's activation is dominated by
//     `math.Tanh`: nn applies tanh through float64 `math.Tanh` per element. `net`
//     stacks single-layer `nn.MLP`s (so GEMMs, init, optimizers and checkpoint names
//     are still nn's) and applies the activation itself with `tanhTo`, a float32
//     piecewise-cubic Hermite interpolant (32 pieces per unit on [0, 10], max error
//     6e-8 = one float32 ulp at 1, no division, no branch on the sign;
//     `BenchmarkTanh*` compares it with `math.Tanh`). It stays in float32: a
//     float32→float64 conversion writes half a register and would chain every element
//     to the previous one. `TestNetMatchesMLP`
//     checks outputs and all gradients against `nn.MLP`. When nn gets a fast tanh,
//     `net` can go.
//  2. The agent owns one goroutine, although an algorithm starts no goroutines of its own.
//     The algorithm files don't; the shared `onpolicy.Agent` does, when
//     `parallel: true` (default): `Agent.Learn` runs the critic's half of a minibatch
//     (forward, value-loss gradient, backward) on a worker while the caller runs the
//     actor's half (forward, policy-loss gradient, head and backward) — `twin`, closed
//     by `Agent.Close`, which `Train` defers. The two networks meet only at the global
//     gradient clip, after both finish, and each is computed by one goroutine in a
//     fixed order, so the results are bit-identical to `parallel: false`
//     (`TestPPOParallelSameResults`, `TestParallelAgentMatchesSequential`). The loss
//     is part of each half, so a minibatch has one hand-off, not two (forward, then
//     backward). The hand-off is `twin.Pair` (see `go doc herd/internal/twin` for how
//     it waits): waking a parked goroutine whose processor went idle can cost as much
//     as a pass.
//  3. PPO continuous control uses the Gaussian head but not CleanRL's observation
//     and reward normalization wrappers (their statistics would need to travel with
//     the checkpoint for `herd eval`).
package onpolicy
