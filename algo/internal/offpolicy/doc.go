// Package offpolicy holds the pieces and the small pieces of math that
// herd's off-policy algorithms (algo/dqn, algo/sac, algo/td3, algo/ddpg)
// share, so that each algorithm file reads top to bottom like CleanRL's
// scripts while the shared equations and plumbing live, tested once, here.
//
// # What the package holds
//
//   - MLPPolicy: the policy (algo.PolicyNet) of all four: one MLP, plus an
//     optional deterministic row-wise head (TD3/DDPG's tanh), rebuilt from
//     a weights.Version (SetWeights) whose layout Params gives.
//   - NoisySampler: TD3's and DDPG's sampler (uniform warm-up actions,
//     then μ(s) + Gaussian or per-env OU noise; ResetEnv at episode ends).
//     SizeActs and RandomActionsTo serve the other samplers.
//   - Assembler: the env-worker side, one NStep per env, appending the
//     n-step transitions a vector step completes (and the episodes that
//     ended) to a sample.Transitions.
//   - Replay: the replay memory (algo.Replay): a replay.Uniform or
//     replay.Prioritized buffer of those transitions, flat minibatches
//     (algo.Minibatch) with per-row discount, importance weights and the
//     slots for priority updates, β annealed with the global step.
//   - EnvWorker: the local executor's env worker: the one off-policy
//     env-step loop (rollout.Transitions: forward, sample, env step,
//     assemble) with the global step count, the prioritizer and episode
//     logging.
//   - ActorPieces: the policy, sampler, assembler and replay TD3 and DDPG
//     build alike; NewPieces: typed constructors → algo.Pieces.
//   - Local: the local executor's loop (EnvWorker, Replay, learner) with
//     its checkpoints (algo.Checkpoints): every piece's state saved between
//     two vector steps and restored bit for bit on resume. LearnerState,
//     MarshalLearner and UnmarshalLearner: the one codec of the learners'
//     state (networks and targets, optimizers, streams, counters); each
//     learner lists its pieces (StateLearner).
//
// # Math
//
//   - LinearSchedule: CleanRL's linear_schedule, used for DQN's ε and PER's β.
//   - NStep: turns one environment's one-step transitions into n-step
//     transitions with their own discount γ^m, handling termination (no
//     bootstrap) and truncation (bootstrap from the true final observation)
//     at episode ends.
//   - Crossed and Crossings: whether / how many times a period counted in
//     global steps fires between two steps (with N envs the step moves by N).
//   - OU: Ornstein–Uhlenbeck exploration noise; AddGaussianNoise,
//     AddOUNoise: exploration around a deterministic action, scaled to the
//     action range and clipped to its bounds.
//   - Twin: the twin critics side by side (Fit, FitGrad); DPGGrad and
//     DPGStep: the deterministic policy gradient.
//   - Learn: SAC's, TD3's and DDPG's Learn, the updates Due hands out run
//     as Grad then Apply on the learner itself, phase by phase
//     (algo.Phaser: the actor's gradient after the critic step), so that
//     one learner and the executors' several compute one update written
//     once.
//   - DPG and DPGAgent: DDPG's and TD3's shared learner (schedule,
//     two-phase Grad, Apply, counts; each algorithm brings its critic
//     loss) and networks.
//   - NewCritics, PolyakAll, Mean: critic construction, target updates and
//     the logged Q means.
//   - Save, Load and Named: several networks in one safetensors file under
//     prefixes; BoxBounds: the finite bounds a tanh actor needs.
//   - LoadPolicy, LoadAgent, TrainFunc: the checkpoint and algo.Spec
//     plumbing; CheckEnv and Common (the settings the four configs inline,
//     their checks and accessors): what Validate and the configs share.
//
// Each algorithm keeps its own losses and updates (targets, critic and
// actor steps, entropy tuning) and its schedule in its Learner, in paper
// order; what lives here is plumbing, or an equation used unchanged by
// several algorithms.
//
// # How a Train composes the pieces (the local executor)
//
//	envs := offpolicy.MakeEnvs(id, N)
//	learner, rb := …newLearner(), …newReplay()
//	worker := offpolicy.NewEnvWorker(envs, policy on learner's live net, sampler, assembler)
//	worker.Reset(seed)
//	(Local.Run: restore the checkpoint a resumed run continues from)
//	for worker.Steps < steps {
//		prev := worker.Steps
//		worker.Step(log)                 // act, step, assemble n-step transitions, log episodes
//		rb.Add(&worker.Transitions)
//		stats := learner.Learn(ctx, rb, prev, worker.Steps)  // the updates due
//		offpolicy.LogStats(log, stats)
//		(Local.Run: a checkpoint when checkpoint_every is due, or ctx ended)
//	}
//
// and the learner's target is r + Discount·(1−Done)·V(s'), which is the
// one-step target γ·(1−done) when n = 1. Replay keeps γ^m in an extra
// column of the stored next observation when n > 1, because replay.Batch
// has no per-row discount.
//
// # Costs and concurrency
//
// Nothing here allocates after construction (Replay: after its first
// Sample; Assembler and EnvWorker: once their transitions have grown to a
// step's largest) or starts goroutines (Twin uses the caller's
// twin.Pair). An NStep, Assembler and EnvWorker belong to one env worker, a
// Replay to the learner's goroutine.
//
// # Off-policy algorithms: algo/dqn, algo/sac, algo/td3, algo/ddpg
//
// Each algorithm is one file (`dqn.go`, `sac.go`, `td3.go`, `ddpg.go`) that reads top to bottom like
// its CleanRL script: `Config` (CleanRL's defaults in `NewConfig`, one yaml key per field, `Validate`
// reporting every problem wrapped in `algo.ErrConfig`), `Agent` (the networks; it is the `algo.Model`
// and, through `LoadPolicy`, the `algo.Policy` of `herd eval`), then `Train` in paper order: envs,
// networks and optimizers, replay, then the loop (act, step, store, hand-off, update, target update,
// log). Each package's `doc.go` numbers the implementation details and explains the metrics.
//
// Shared parts live in `algo/internal/offpolicy` (no promised API):
//
//	| piece | what | why shared |
//	|---|---|---|
//	| `LinearSchedule` | CleanRL's `linear_schedule` (ε; PER's β) | same equation in several places (target updates use `nn.PolyakUpdate`) |
//	| `Crossed(prev, cur, every)` | "a multiple of `every` lies in (prev, cur]" | with N envs the global step moves by N; periods (train every 10 steps, target every 500) must fire once per multiple passed |
//	| `NStep` | per-env n-step accumulator, γ^m per transition | the easy-to-get-wrong part of n-step returns: episode ends |
//	| `Replay` | n-step accumulators + `replay.Uniform`/`replay.Prioritized` + flat minibatch (`Obs`, `Action`, `Reward`, `NextObs`, `Discount`, `NotDone`, `Weight`) + priority updates | one place that knows the replay API |
//	| `Save`/`Load` with `Named` | several networks in one safetensors file under prefixes (`actor.0.weight`, `qf1.0.weight`) | `nn.SaveFile` takes one parameter list whose names would collide |
//	| `BoxBounds` | finite Box bounds or an error naming the env | the tanh actors need them |
//	| `OU` | Ornstein–Uhlenbeck exploration noise (SB3's θ 0.15, dt 0.01), reset per episode | TD3's `noise_type: ou` (MountainCarContinuous) |
//
// `algo/internal/learntest` holds the test plumbing shared by the four packages: train into a
// `metrics.Recorder`, strip the wall-clock columns of `metrics.csv`, the Pendulum smoke test
// (deterministic return must improve on the untrained policy's), allocations per step, the
// cancellation contract, strict resolution of every `configs/<algo>-*.yaml`, and the multi-seed
// `Seeds` benchmark used while tuning (`HERD_SET`, `HERD_STEPS`, `HERD_SEEDS`, `HERD_BENCH_OUT`).
//
// # What nn could do for these algorithms
//
//   - DQN spends most of its CPU in `nn`'s GEMM kernels on shapes that fit a 4×16 micro-kernel
//     badly (4→120 input layer, 84→2 output layer): small-K / small-N paths would pay.
//   - `MLP.Backward` always computes dL/dx of the input layer (through a transposed copy of W);
//     an algorithm that only needs parameter gradients could skip it.
//   - SAC/TD3/DDPG back-propagate through the critic only to get dQ/da for the actor;
//     `Critic.Backward` also computes the critic's weight gradients, which are discarded. An
//     input-gradient-only backward would save that work.
//
// # Termination vs truncation
//
// All four algorithms store `s' = Batch.NextObsRow(i)`: the vector env resets an ended episode in the
// same `Step` and keeps the true last observation in `Batch.FinalObs`. The stored flag is
// `terminated` only, so the target `r + γ^m·(1 − terminated)·V(s')` bootstraps through a time-limit
// truncation from the true final state and never from the next episode's first observation. `NStep`
// flushes pending transitions at either kind of episode end (`TestNStepTruncationBootstrapsFromFinalObs`).
//
// # Departures from CleanRL, and why
//
//   - n-step discount stored in an extra observation column. `replay.Batch` has no per-transition
//     discount, but an n-step transition cut short by an episode end needs γ^m with m < n. With
//     `n_steps > 1`, `offpolicy.Replay` stores observations one float wider and keeps γ^m in the last
//     column of the next observation; `Sample` strips it. With n = 1 rows are stored unchanged. (A
//     `Discount` field in `replay.Batch` would remove this workaround.)
//   - Prioritized replay priorities are |δ| + `priority_eps` with δ = Q(s,a) − y computed in the same
//     step; updates carry the sampled slots' generations so `replay.Prioritized` drops an update for a
//     slot overwritten since the sample. β anneals linearly from `priority_beta` to 1 over the run.
//   - SAC's α loss reuses log π of the actor step's sample (Stable-Baselines3's order) instead of
//     CleanRL's fresh sample after the actor step: one actor forward pass less per update.
//   - DDPG keeps CleanRL's policy delay of 2 (set `policy_frequency: 1` for the paper's algorithm)
//     and Gaussian exploration instead of Ornstein–Uhlenbeck noise (as CleanRL and the zoo do).
//   - Pendulum configs use 64-64 networks instead of the zoo's 256-256 (SAC) or 400-300
//     (TD3/DDPG), and 1000 warm-up steps instead of 10000 (TD3/DDPG) or 100 (SAC): on a 2-core CPU
//     a 400-300 update costs tens of times a 64-64 one, and Pendulum does not need the width. Each config
//     file says so in its header.
//   - `dqn-cartpole-zoo.yaml` runs 120k steps instead of the zoo's 50k because herd's learning
//     target is the mean return of the last 100 *training* (ε-greedy) episodes, not a separate
//     evaluation.
//   - `td3-mountaincarcontinuous.yaml` uses Ornstein–Uhlenbeck exploration (`noise_type: ou`,
//     σ 0.5, as the zoo) with 64-64 networks and 100k steps instead of the zoo's 400-300 and 300k.
//   - One worker goroutine in DQN, SAC and TD3. Envs are stepped with `env.SyncVector` and scaling out is
//     `run/`'s job, but a DQN training step would use one of the two cores: `Train` owns a
//     `twin.Pair` (closed before it returns) that computes the target network's forward pass beside
//     the online one's and, through `nn.MLP.BackwardSplit`, the second layer's dW = Xᵀ·dZ beside
//     the rest of the backward pass; Adam stays on the caller (algo/dqn's package doc says why).
//     Each value is computed by the same kernels on the same operands, so `metrics.csv` is
//     bit-identical to the sequential code (`parallel: false`). The halves hand over without
//     channels: parking and waking a goroutine would cost as much as a pass. SAC and TD3 run their twin critics the same way
//     (`offpolicy.Twin`); DDPG (one critic) does not.
//
// # Determinism
//
// Every random stream comes from `internal/rng` with its own role: `<algo>/init` (weights),
// `<algo>/explore` (ε draws, warm-up actions, exploration noise), `<algo>/learner` (policy samples and
// smoothing noise inside updates), `<algo>/replay` (minibatches); envs are seeded by
// `Vector.Reset(seed)`. Every package has `TestDeterministic`: two runs with the same seed give an
// identical `metrics.csv` without the wall-clock columns, and a different seed gives a different one.
//
// # Shared algorithm plumbing (algo/internal/offpolicy, onpolicy, learntest)
//
// SAC, TD3 and DDPG (and PPO and A2C) used to copy their plumbing. It now
// lives in small named functions. Each algorithm file still reads top to
// bottom like CleanRL's scripts, and its losses and updates stay in it, in
// paper order.
//
//   - `offpolicy.Collector` is the continuous-action env loop: N sync envs
//     with episode statistics, Box bounds, the one-step `Replay`, uniform
//     actions before `learning_starts`, `Step` (store (s, a, r, s'_true,
//     terminated), log episodes, the obs hand-off) and the global step count.
//     DQN is not on it yet. Its loop differs (discrete actions, n-step,
//     prioritized replay).
//   - `offpolicy.AddGaussianNoise` and `AddOUNoise` give the exploration
//     around μ(s). `AddOUNoise` also draws one normal per action value and
//     throws it away. TD3's first OU code did this, and keeping the draw keeps
//     old OU runs bit-identical. Dropping it would be a deliberate,
//     result-changing follow-up.
//   - `offpolicy.Twin` holds SAC's and TD3's critic pair: `Fit` is the regression onto y,
//     MSE(Q1, y) + MSE(Q2, y), and `Forward`/`Backward` evaluate both critics; Q2 runs on a
//     `twin.Pair` worker beside Q1 (bit-identical metrics, checked against the previous
//     binary; SAC Pendulum 20k steps 12.5 → 9.9 s, TD3 8.1 → 7.5 s). `offpolicy.DPGStep` is the −E[Q(s, μ(s))] actor step of DDPG
//     and TD3. Each algorithm still computes its own target y and calls these
//     in paper order. They are shared equations, not new behaviour.
//   - `offpolicy.NewCritics`, `PolyakAll`, `Mean`, `CheckEnv`, `Common.Check`,
//     `LoadPolicy`/`LoadAgent` and `TrainFunc` are the setup, validation,
//     checkpoint and `algo.Spec` glue. With `TrainFunc`, a config of the wrong
//     type is an `ErrConfig` error, not a panic.
//   - `onpolicy.NewPieces`/`TrainLocal` build the pieces and run the local executor (see
//     "Algorithm pieces"). `onpolicy.Common.Check`, `LoadPolicy`, `TrainFunc` and `PiecesFunc`
//     do the validation and `algo.Spec` glue for PPO and A2C.
//   - `learntest` adds `Deterministic`, `ConfigError`, `SaveLoad`, `Reload`,
//     `NoAllocs`, `Resolve`, `TrainFiles` and the `Pendulum` suite. The suite
//     runs smoke, determinism, save-load, no-allocs, cancel, bad-config and
//     configs as subtests of `TestPendulum` in sac, td3 and ddpg.
//
// Goldens pin the bits of every algorithm: TestPPOSameBitsAsBefore,
// TestA2CSameBitsAsBefore and algo/all's TestOffPolicySameBitsAsBeforeThePieces
// compare metrics and weights with recorded hashes.
//
// # The off-policy pieces, algorithm by algorithm
//
// (Off-policy half: `algo/offpieces.go`, `algo/internal/offpolicy`, each algorithm's
// `pieces.go`. The on-policy half and the shared interfaces are described above.)
//
// An off-policy algorithm's `Spec.Pieces(h, cfg, spaces)` fills the shared `algo.Pieces` fields
// `NewPolicy` and `NewSampler` and the embedded `algo.OffPolicy`:
//
//	| piece | runs on | DQN | SAC | TD3 / DDPG |
//	|---|---|---|---|---|
//	| `PolicyNet` (`offpolicy.MLPPolicy`) | policy worker | Q(s, ·) | actor's raw (μ, log σ) | μ(s) = tanh(f(s))·scale + bias |
//	| `Sampler` | env worker | ε-greedy at ε(step) | tanh-Gaussian sample | μ(s) + Gaussian / OU noise (per-env OU state, `algo.EnvResetter`) |
//	| `Assembler` (`offpolicy.Assembler`) | env worker | n-step transitions per env → `sample.Transitions` | one-step | one-step |
//	| `Replay` (`offpolicy.Replay`) | beside the learner | uniform or prioritized (β anneals with the step) | uniform | uniform |
//	| `TransitionLearner` | learner | TD loss (MSE/Huber, IS-weighted), target net, priorities | twin soft Q, actor, α | clipped double Q + smoothing (TD3), DPG actor, delays |
//
// All samplers draw uniform random actions before `learning_starts` (the continuous ones) or follow
// the ε schedule (DQN) from the env worker's stream; the draws happen in row order, so the actions
// depend only on the outputs and the stream, never on the batch a policy worker computed them in.
//
// The learner's clock is env steps. `Learn(ctx, rb, prev, step)` runs the updates due for the
// global env steps `(prev, step]` after `learning_starts` (none while `rb` holds less than a batch):
// DQN `gradient_steps` per multiple of `train_frequency` passed and one target update per multiple of
// `target_network_frequency`; SAC, TD3 and DDPG one update per env step, their delays counted as
// with one env. So the replay ratio is a property of the learner, not of how an executor groups env
// steps (num_envs, steps per call) — `TestOffPolicyReplayRatioIndependentOfNumEnvs`. Each update
// draws its minibatch (`algo.Minibatch`: transitions + importance weights + slots) from `rb` with the
// learner's own stream and hands TD errors back with `rb.UpdatePriorities(mb, tdErr)`. Why the
// learner samples rather than receiving a minibatch: the schedule decides how many minibatches a
// span of env steps needs (DQN with 16 envs and `train_frequency` 4: four per vector step), and
// SAC's delayed actor reuses the critic's minibatch; a learner that receives one minibatch per call
// would push that schedule into every executor. `Weights()` is the policy's parameters (Q-network
// or actor) as a `weights.Version` numbered by updates; `Close()` stops the learner's `twin` helper.
//
// Local executor. `Train` builds envs (`offpolicy.MakeEnvs`), the learner and replay, and an
// `offpolicy.EnvWorker` (policy, sampler, assembler) whose policy is an `MLPPolicy` on the
// learner's *live* network — same goroutine, no copy. Publishing a version per training round would
// copy every parameter (≈ 5% of a DQN CartPole run); the old loop shared the network too, which is
// why the bits are unchanged. The loop is then: `worker.Step` (forward, sample, env step, assemble,
// log episodes) → `rb.Add` → `learner.Learn` → log scalars. A parallel executor runs the same
// pieces with a policy copy refreshed from `weights.Store` every k updates.
//
// Same bits. `algo/all TestOffPolicySameBitsAsBeforeThePieces` trains seven short runs (DQN
// plain, DQN double+PER+3-step, DQN with 4 envs, SAC, TD3, TD3 with OU noise, DDPG) and compares the
// sha256 of `model.safetensors` with the values recorded from commit c7b923d (the code before the
// pieces) via `herd train`. They are configs where the old loop already did what its doc said
// (num_envs ≤ train_frequency; one env for SAC/TD3/DDPG). The behaviour change: DQN with num_envs >
// train_frequency now trains once per multiple passed (the old loop trained at most once per vector
// step, 4× fewer updates than documented with 16 envs and `train_frequency` 4), and SAC/TD3/DDPG with
// num_envs > 1 now take one update per env step instead of one per vector step.
//
// Gradients. Finite-difference tests against float64 references (`learntest.MLP64`): DQN's
// TD loss with prioritized weights (MSE and Huber) w.r.t. Q(s, ·); SAC's actor loss w.r.t. the actor
// outputs through the minimum critic and the reparameterised tanh-Gaussian, its α loss and its soft
// target; the twin critic loss w.r.t. every critic parameter; the DPG actor loss of TD3/DDPG.
//
// Open. `PolicyNet` has no `Params()`: rebuilding a policy from bytes needs
// `weights.Decode(b, like)` with the policy's parameter layout, which `MLPPolicy.Params()` gives
// (the test type-asserts it); the interface might grow a `Decode([]byte)` or `Params()`.
// `offpolicy.Replay` is single-goroutine (PAL's concurrent buffer would wrap `replay.Prioritized`
// with its sharded locking behind the same `algo.Replay`).
package offpolicy
