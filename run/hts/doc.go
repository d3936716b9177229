// Package hts is herd's synchronous high-throughput executor (HTS-RL, Liu,
// Yeh and Schwing, NeurIPS 2020) for algorithms with a segment learner
// (algo.CanSegmentLearner: PPO, A2C; Executor states it): the
// results of synchronous training, bit for bit for a seed whatever the
// number of workers, at the throughput of an asynchronous system when env
// step times vary.
//
// # Roles
//
//   - Env workers (HTS-RL's executors) own contiguous blocks of envs, which
//     they step in rollout.Segments (the one on-policy env-step loop) with
//     rowPolicy acting: per step the worker asks the policy workers for its
//     rows' outputs, samples each row with the row's own sampler, steps its
//     envs, and goes on, never waiting for the other workers until the
//     segment's α steps are done. At the end it copies its rows into each
//     policy's segment.
//   - Policy workers (HTS-RL's actors) take every inference request pending
//     when they wake and answer it as one batch (the state buffer).
//   - A recurrent policy (PPO-LSTM) keeps each env's state with the policy,
//     shared by the policy workers: a request names its rows, and whichever
//     worker answers it reads and advances their states (a value request
//     reads them only). The env worker's loop records the states each
//     segment starts from and zeroes an env's state where its episode ends,
//     as the local loop does. Requests for the same rows never overlap, so
//     which worker answers changes no state.
//   - The learner updates from the segment gathered in the previous
//     interval while the env workers fill the other storage.
//
// # The barrier protocol
//
// Segment k (α steps of every env) is written into storage k mod 2. When
// every env worker has finished it (the barrier):
//
//  1. the learner's update from segment k−1 is collected and published as
//     weights version k (the store changes only here, while no inference
//     request is in flight);
//  2. the learner starts on segment k, from weights k, concurrently with
//  3. the env workers gathering segment k+1 into the other storage, acting
//     with version k.
//
// So segment k is gathered with weights k−1 (segments 0 and 1 with the
// initial weights), and θ_{k+1} = learn(θ_k, segment k): the policy lags by
// exactly one update. The learner's Learn sees the lag in the segment's
// version and corrects it, per algorithm:
//
//   - A2C uses HTS-RL's delayed gradient (Eq. 6): the learner keeps the
//     behaviour parameters θ_{k−1} of the segment, evaluates the
//     synchronous A2C loss and its gradient there, and applies that
//     gradient to θ_k with θ_k's optimizer state (a2c: delayed_gradient,
//     default true; false gives Eq. 5, the gradient at θ_k on data from
//     θ_{k−1}, which the paper warns against). A2C reads no behaviour
//     log-probabilities.
//   - PPO uses Eq. 6 too (ppo: delayed_gradient, default true): every
//     minibatch gradient is evaluated at θ_{k−1} moved by the steps the
//     update has taken so far (θ_{k−1} itself for the first minibatch) and
//     applied to θ_k with θ_k's Adam state. delayed_gradient: false
//     evaluates the clipped surrogate at θ_k with the importance ratio
//     π_θ(a|s)/π_{θ_{k−1}}(a|s) against the behaviour log-probabilities
//     recorded with each action, as the HTS-RL authors' released learner
//     does (on CartPole it reached 500 in 4 of 5 seeds, the delayed form
//     in 5 of 5).
//
// The segments 0 and 1 are both gathered with θ_0; the first has no lag.
// With Options.Sync there is no lag and both forms are plain A2C and PPO.
//
// # Why results do not depend on worker counts
//
//   - Randomness belongs to env slots, not workers: env i is reset with a
//     seed from (seed, "hts/env", i) and samples with its own stream
//     (seed, "env-worker", i), so how envs are spread over E workers
//     changes no draw.
//   - A policy's row outputs do not depend on the batch they were computed
//     in (nn keeps rows bit-independent), and the weights are fixed between
//     barriers, so which of the P policy workers answers, and with whom,
//     changes no output.
//   - Every env writes its own rows of the segment (row t·N+i), episodes
//     are merged in (step, env) order, and the learner is one goroutine
//     that runs the algorithm's own deterministic update.
//   - Step-time draws (env.WithStepTime) use the env's own stream and only
//     sleep.
//
// Timing decides nothing but when things happen, so GOMAXPROCS, load and
// step times change the wall clock and never the bits.
//
// # Several policies
//
// A run with a multiagent section (algo.MultiAgentConfig) trains one
// policy per id under the same barriers: each policy has its own pieces,
// learner, weights store and pair of segment storages, and its rows are
// the slots' agents it acts for (policy k's row g·A_k + r is the r-th of
// its A_k agents in slot g, so its segment holds slots × A_k rows). An
// env worker asks for every policy's outputs on its rows at each step
// (all requests sent before the first answer is awaited), samples each
// row with its policy's sampler, then steps the slot once. Policy workers
// serve every policy: each holds one net per policy and answers the
// requests it drains policy by policy, each group as one batch. At a
// barrier every learner's update is collected and published in policy
// order, and the learners start on their segments together, one
// goroutine each. Policies may have different action spaces (one per
// policy, its agents'): each policy's pieces and segments are sized to
// its own, and a slot's row of actions is as wide as its widest agent's
// (env.WithAgentActionSpaces), each agent's action leading its row.
//
// The rules above hold per policy, so the bits still do not depend on E
// or P (TestSeveralPoliciesSameBits): policy k's header is algo.PolicyRun's
// (seed + k, its algorithm and section), its row r samples with (seed + k,
// "env-worker", r), and the envs reset from the run seed as before. Every
// policy needs on-policy pieces (PPO or A2C) and the same num_steps (α).
// A section whose one policy acts for every agent trains the shared
// policy's bits (TestOnePolicyMappingIsTheSharedPolicy). The run's return
// columns get every agent's episodes in (step, row) order, and
// policy/<id>/… its agents' (algo.PolicyScalars), as under the local
// executor; the model is an algo.Policies.
//
// # The metrics rows and the divergence guard
//
// The executor writes its metrics row (algo.Logger.Step, where TrainRun's
// divergence guard checks and copies the parameters) at the barrier,
// before the learner is handed the next segment, so the guard never reads
// parameters the learner is writing, whatever log_every is.
//
// # Checkpoints and resume
//
// With Runtime.Checkpoints (`herd train --resume`), a run of one policy
// saves its state at a barrier: after the update of segment k−1 is
// published as version k and before the learner is handed segment k.
// There nothing is in flight and the double buffer is whole: segment k
// (gathered with version k−1, not learned yet), the learner at θ_k with
// θ_{k−1} for the delayed gradient (algo.LearnerCheckpoint), every env's
// state, sampler stream and next observation, and a recurrent policy's
// state of every env (no request is in flight, so the policy workers
// hold it whole). The other storage is not
// saved (segment k+1 rewrites it) and version k is the learner's θ_k. A
// resumed run starts the learner on segment k and the env workers on
// segment k+1, as the uninterrupted run did, so the bits are the same for
// any E and P (TestResumeBitIdentical). A stop (ctx) is taken at the next
// barrier: the segment under way and the update in flight finish first.
// Choosing the barrier before the update (rather than after it, with no
// segment pending) costs no wait for the learner at a checkpoint.
// Envs whose state cannot be saved are left out of the checkpoints
// (with a recurrent policy's state of them); a resumed run resets each
// env slot with a seed of its own and the resumed step instead.
//
// # Synchronous baseline and Claim 1
//
// Options.Sync runs the same pieces the synchronous way (a barrier after
// every step, the learner between segments with no lag), which is what
// `herd bench hts` compares against. HTS-RL's Claim 1 predicts both
// collection times per step, E[max_i X_i] for synchronous collection and
// E[max_i Σ_{t<α} X_{i,t}]/α for HTS, for n envs of i.i.d. step times X:
// Predict integrates the expectations by Monte Carlo for the actual
// step-time distribution; GammaExact evaluates them exactly (numerical
// integration) for Gamma step times of the same mean and variance; Eq7 is
// the paper's closed form, the Gumbel extreme-value limit, which holds
// only where ln n is large next to the Gamma shape (a segment's sum of α
// steps over a few envs is far outside that range, and Eq7 says so).
// `herd bench hts` prints all three beside the measurement, each plus a
// per-step overhead measured by a separate calibration run
// (constant step times), not by the runs predicted.
//
// # Design notes
//
// `runtime: {executor: hts, env_workers: E, policy_workers: P}` runs PPO or A2C the HTS-RL way
// (Liu, Yeh, Schwing 2020). The code is `run/hts/hts.go`; `run/hts/doc.go` states the rules.
//
//   - Roles. Env workers (HTS-RL's executors) own contiguous blocks of the N envs, stepped in
//     rollout.Segments between barriers: they send their rows' observations to the inference
//     stream, sample each row with its *own* sampler, step, and go on. Policy workers
//     (HTS-RL's actors) take every request pending when they wake and answer them as one batch. The
//     learner runs on its own goroutine.
//   - Barrier protocol. Segment k (α = `num_steps` steps of every env) is written into storage
//     k mod 2. At the barrier (every env worker done): (1) the learner's update of segment k−1 is
//     collected and published as weights version k — the store changes only here, while no request
//     is in flight; (2) the learner starts on segment k from weights k; (3) the env workers gather
//     segment k+1 into the other storage with version k. Segments 0 and 1 are gathered with the
//     initial weights; segment k with weights k−1; θ_{k+1} = learn(θ_k, segment k). What lags by
//     one update is the *behaviour* policy; the learner always updates the newest weights, with the
//     gradient evaluated at the behaviour parameters (Eq. 6, above).
//     `TestOneUpdateLag` checks the version sequence (0, 0, 1, 2, …; the synchronous baseline 0, 1,
//     2, …).
//   - Why results do not depend on E, P, GOMAXPROCS or step times. Randomness belongs to env
//     *slots*: env i resets from (seed, "hts/env", i) and samples with (seed, "env-worker", i), so
//     spreading envs over workers changes no draw. Policy rows are bit-independent of their batch and
//     the weights are fixed between barriers, so which policy worker answers, and with whom, changes
//     no output. Each env writes its own segment rows; episodes are merged in (step, env) order; the
//     learner is one goroutine running the algorithm's deterministic update. Step-time draws use the
//     env's own stream and only sleep. `TestSameBitsForAnyWorkers` (CI, also under `-race`) and
//     `scripts/hts-determinism.sh` (100k steps) compare the final parameters.
//   - α. HTS-RL's synchronization interval is the segment length, i.e. the algorithm's
//     `num_steps`; `runtime.alpha` may restate it but not change it (the learner plans its learning
//     rate schedule and minibatches on `num_steps`).
//   - Variable step times. `env.WithStepTime(env.StepTime{Mean, CV, Dist: lognormal|gamma,
//     TailProb, TailFactor})` (or `runtime.step_time` under hts) sleeps a drawn duration before every
//     step; the dynamics are untouched (`TestStepTimeKeepsDynamics`).
//   - Synchronous baseline. `hts.Options.Sync` runs the same pieces with a barrier after every
//     step and the learner between segments (no overlap, no lag): what `herd bench hts` compares
//     against, and Claim 1's "synchronous" case. Claim 1: see `Predict`, `GammaExact` and `Eq7` above.
//   - When to use it. Whenever env step times vary (simulators, remote envs): the measured gain at
//     16 envs with mean 1 ms is 2.7–2.9x at CV 2–3 (docs/BENCHMARKS.md). For CartPole-speed envs the
//     barrier and inference hand-offs cost more than they hide; use the local executor.
//   - Departure. The paper's executors run one env each on separate processes; here they are
//     goroutines, and an env worker with several envs asks for their outputs in one request and
//     steps them in turn (default E = N, one env each).
package hts
