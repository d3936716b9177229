// Package env is herd's environment API: Gymnasium's semantics and names in
// Go, built so that stepping never allocates and never limits training.
//
// # Envs
//
// An Env has an ObservationSpace, an ActionSpace, Reset(seed) → (obs, info)
// and Step(action) → (obs, reward, terminated, truncated, info), and Close.
// Make builds one by its Gymnasium id, with Gymnasium's TimeLimit:
//
//	e, err := env.Make("CartPole-v1", env.WithEpisodeStatistics())
//	obs, _, err := e.Reset(42)
//	for {
//		obs, reward, terminated, truncated, info, err := e.Step(action)
//		...
//		if terminated || truncated {
//			obs, _, err = e.Reset(env.NoSeed)
//		}
//	}
//
// IDs lists the registered ids (CartPole-v0/v1, Pendulum-v1, their
// velocity-masked CartPoleNoVel-v1 and PendulumNoVel-v1, MountainCar-v0,
// MountainCarContinuous-v0, Acrobot-v1, LunarLander-v3,
// LunarLanderContinuous-v3, and MinAtar's MinAtar/Asterix, Breakout,
// Freeway, Seaquest and SpaceInvaders, each -v0 with all six actions and -v1
// with the minimal set, and the probe envs Probe/Bandit-v0 and
// Probe/Corridor-v0, on which a working algorithm learns the optimal
// policy in seconds); SpecOf gives max_episode_steps and the reward
// threshold. The envs themselves live in env/classic, env/box2d,
// env/minatar and env/probe. An id WRAPPERS:ID wraps ID in env/atari's
// image preprocessing ("atari:grpc://HOST:PORT/BreakoutNoFrameskip-v4",
// "max_and_skip=2,frame_stack=4:MinAtar/Breakout-v1"; see Make).
//
// Observations are float32 (the env keeps its state in float64) and the
// returned slice is owned by the env until its next Reset or Step. Rewards
// are float64 from a single env and float32 in a vector Batch.
//
// # Actions
//
// Every action is a flat []float32, so one buffer type serves discrete and
// continuous control and a vector env takes one flat batch:
//
//   - Discrete(n): ONE value holding the index as a float32 (0, 1, …; exact
//     below 2^24). Non-integral or out-of-range values are ErrInvalidAction.
//   - Box: Dim() values, row-major. Wrong length or NaN/Inf is
//     ErrInvalidAction. Values outside the bounds are passed to the env,
//     which clips them as Gymnasium does (MountainCarContinuous even
//     penalises the unclipped value); add ClipAction to clip before the env,
//     or WithStrictActions to reject them.
//   - MultiDiscrete: one integral value per dimension.
//
// Space.Dim() is the number of values per action (1 for Discrete). The
// caller owns the slice and may reuse it at once.
//
// Observations may also be a Dict (Gymnasium's spaces.Dict): subspaces
// ordered by key, their encodings concatenated. Policies read flat
// vectors, so Make wraps an env observing a Dict in FlattenObservation
// (Gymnasium's: a Box, Discrete and MultiDiscrete values one-hot) and a
// FlatVector flattens each agent's Dict into its row.
//
// # Seeding
//
// Reset(seed) with seed ≥ 0 reseeds the env's stream from internal/rng;
// Reset(NoSeed) continues it. The same seed gives the same episodes. Reset
// distributions of the classic and Box2D envs follow Gymnasium's ranges but
// not NumPy's Generator stream, so episodes differ from Python's while their
// dynamics match it to 1e-12. The MinAtar envs are the exception: MinAtar
// draws from NumPy's legacy RandomState, which env/minatar reproduces, so
// the same seed and actions give MinAtar's own episodes.
//
// # Vector envs
//
// SyncVector (one goroutine) and AsyncVector (a worker pool, one block of
// envs per worker) implement Vector: N envs, one flat []float32 of
// observations (N × ObsDim), float32 rewards, terminated and truncated
// flags. Episodes that end are reset in the same Step; the true final
// observation is in Batch.FinalObs (see Vector for the exact convention) and
// Batch.NextObsRow(i) picks the right next observation for a transition.
// Vector.Reset(seed) seeds env i with VectorSeed(seed, i). The loop an
// algorithm runs is Example_vectorRandomPolicy.
//
// # Wrappers
//
// TimeLimit, RecordEpisodeStatistics, ClipAction, StrictActions,
// NormalizeObservation and NormalizeReward wrap an Env and are Envs;
// Unwrapped reaches the innermost one. The normalisers' running statistics
// (RunningMeanStd) can be read with Stats and restored with SetStats, to be
// saved with a checkpoint.
//
// # Internal state
//
// The classic-control envs implement Stater, the counterpart of Python's
// env.unwrapped.state:
//
//	st := env.Unwrapped(e).(env.Stater)
//	s := st.StateTo(nil)
//	obs, err := st.SetState([]float64{0, 0, 0.1, 0})
//
// # Remote envs
//
// With a Maker whose Remote is herd/env/remote's Opener (cmd/herd builds
// one; algo.Header.Envs carries it), an id of the form grpc://HOST:PORT/ID
// (grpcs:// for TLS) makes its Make and MakeVector open the env on a server speaking herd's protocol
// (proto/herd/v1/env.proto): `herd serve env` for herd's own envs, or
// `python3 -m herd_env.serve` for any Gymnasium-style Python env. A
// remote.Vector steps all its envs with one message per batch, or with
// ?inflight=K splits them over K sessions whose messages travel together
// (same results, bit for bit, for every K); every call has a deadline
// (?timeout=30s), so a dead server is an error, never a hang. On the same
// Linux host, shm://NAME/ID reaches `python3 -m herd_env.serve --shm NAME`
// or `herd serve env --shm NAME` through shared memory: the batch's arrays live in a memfd segment both
// processes map, and one pipe byte each way wakes the other side (about
// ten microseconds per message instead of hundreds over gRPC). A uint8
// image observation space travels one byte a value over gRPC, with ALE's
// lives (Info.Lives) and action meanings; shm's step segment holds floats
// and no lives. See herd/env/remote for the id's parameters and how errors
// map back to this
// package's sentinels.
//
// # Multi-agent envs
//
// Parallel is PettingZoo's Parallel API: PossibleAgents, Agents (those still
// in the episode; an agent whose step returned terminated or truncated
// leaves), ObservationSpace(agent), ActionSpace(agent), Reset(seed) and
// Step(actions) with one map entry per agent. MakeParallel builds one by id
// (ParallelIDs: mpe/simple_spread_v3, mpe/simple_tag_v3,
// mpe/simple_reference_v3, exact ports of PettingZoo 1.24.3's MPE, see
// env/mpe); keywords go in the id or WithKwargs:
//
//	p, err := env.MakeParallel("mpe/simple_spread_v3?N=4&local_ratio=0.25")
//	obs, _, err := p.Reset(1)
//	obs, rewards, terms, truncs, infos, err := p.Step(map[string][]float32{
//		"agent_0": {1}, "agent_1": {4}, "agent_2": {0}, "agent_3": {2}})
//
// ParallelVector steps N of them with Vector's same-step autoreset.
// FlatVector turns one into a Vector of per-agent rows (row i·A + j is
// agent j of env i, observations padded to the longest, optionally followed
// by a one-hot agent id, the action mask and the global state: RowLayout),
// so every single-agent algorithm trains one policy shared by all agents
// (parameter sharing). The global state is the env's own (GlobalState,
// PettingZoo's state()), else the agents' observations concatenated; the
// action mask comes from each agent's Info.ActionMask (PettingZoo's
// info["action_mask"]), and the agents' infos reach the batch.
// MakeVector does this for a multi-agent id: n counts ROWS and must be a
// multiple of the number of agents; "agent_id=true", "action_mask=true"
// and "state=true" in the id choose the extra columns. Make gives a TurnEnv, where agents take
// turns and the reward is the team's (used by evaluation and checkpoint
// loading). Agents that leave before the others are "dead rows" until the
// episode ends (zero observation and reward, counted by DeadRowSteps).
//
// A remote id (grpc://HOST:PORT/ID) is a multi-agent id when its server
// lists ID as one (Maker.IsParallel asks it): MakeParallel gives a
// remote.Parallel (a GlobalState too when the server sends the env's
// state), and MakeVector a FlatVector whose envs all live in one server
// session (a ParallelBatch). The server sends the agents' action masks
// and, for state=true, the env's own global state, so the rows are those
// of the env served locally.
//
// SplitVector cuts a vector's rows into parts that step in lockstep, each
// driven by its own goroutine: several policies, each acting for its own
// agents' rows of one FlatVector (run/multipolicy, examples/twinplan).
// Agents with different action spaces (toy/signal_v0) need one policy per
// group of agents that share one: WithAgentActionSpaces lets a FlatVector's
// agents differ, and each part then reports its own rows' action space;
// without it they are refused. "act_as=AGENT" in a multi-agent id, local
// or remote (kept on this side, as agent_id is), makes Make's TurnEnv
// report that agent's action space.
//
// # Costs and concurrency
//
// A classic-control Step costs tens of nanoseconds and allocates nothing;
// wrappers add a few nanoseconds each. An Env and a Vector are driven by one
// goroutine. AsyncVector owns its worker goroutines; Close stops them and
// waits. Errors are the package sentinels (ErrInvalidAction, ErrNeedsReset,
// ErrUnknownID, ErrInvalidOption, ErrInvalidState, ErrClosed), wrapped with
// context; match them with errors.Is.
//
// # Design notes
//
// Why `env/internal/core`. `env.Make` must construct classic and box2d envs, and those must
// return `env.Space`, `env.Info` and the `env` errors: a cycle. The usual alternative, a registry
// filled by `init()` in each env package (as `database/sql` drivers do), is global mutable state,
// which the project rules forbid. So the types live in `env/internal/core`, `env` re-exports each as
// an alias (`type Space = core.Space`, `var ErrInvalidAction = core.ErrInvalidAction`), and the
// registry is a function returning a fresh table. Users only ever import `env`; the types are
// identical, so `classic.NewCartPole(...)` is an `env.Env`.
//
// Actions are a flat `[]float32` for every space. Discrete: one value holding the index;
// Box: `Dim()` values; MultiDiscrete: one value per dimension. One representation means one buffer
// type for discrete and continuous algorithms, a vector env takes one flat `N·Dim` batch, and nothing
// is boxed into an interface per step (an `any` action would allocate). Float32 holds indices
// exactly below 2^24. Invalid discrete values (non-integral, out of range), wrong lengths and NaN/Inf
// are `ErrInvalidAction`. Out-of-bounds Box values are passed on, because Gymnasium's envs clip
// them themselves and MountainCarContinuous's reward even penalises the unclipped value — rejecting
// them would change the dynamics; `WithStrictActions()` / `NewStrictActions` reject them instead and
// `ClipAction` clips before the env.
//
// `Reset(seed int64)` with `env.NoSeed` (−1) for Gymnasium's `seed=None`: a plain integer keeps
// the call allocation-free (a `*int` would escape through the interface). Seeds feed
// `internal/rng` streams `(seed, "env", 0)`; a never-seeded env behaves as seeded with 0 (Gymnasium
// would use OS entropy; herd never does).
//
// Step returns Gymnasium's 5-tuple plus `error`, `Info` is a small struct (episode statistics, an
// action mask),
// and observation slices are owned by the env until its next call — all so that a step allocates
// nothing. Stepping after `terminated` is `ErrNeedsReset` (Gymnasium only warns and returns
// reward 0; an error is more useful to algorithm authors). Every env tracks its own termination;
// `TimeLimit` tracks truncation and sets `truncated` on the step that reaches the limit without
// clearing `terminated`.
//
// Vector autoreset: same step. When env *i*'s episode ends, the vector resets it inside the same
// `Step`: `Batch.Obs` row *i* is the new episode's first observation, `Batch.FinalObs` row *i* the
// true last observation (written only for ended envs, so every observation is copied exactly once),
// and `Batch.NextObsRow(i)` picks the right successor for a transition. This is Gymnasium's
// SAME_STEP mode (its 0.26–0.29 default, with `final_observation` in `info`); Gymnasium 1.x defaults
// to NEXT_STEP, which needs a dummy step per episode end and masks in every algorithm — SAME_STEP
// keeps CleanRL-style loops simple and gives bootstrapping the real final observation. Env *i* is
// seeded with `VectorSeed(seed, i)` = `rng.Derive(seed, "env/vector", i)`, so results depend only on
// the seed and the slot — SyncVector and AsyncVector give identical batches (tested).
//
// AsyncVector uses goroutines, not processes. The envs are split into contiguous blocks, one per
// worker; the calling goroutine steps block 0 itself and one goroutine per other block steps the
// rest, each writing its rows of the shared batch directly. The rows are disjoint and the caller
// reads only after every worker has signalled, so there is no lock and no copy, and one worker
// means no goroutine at all. Each worker is a `twin.Pair` (`internal/twin`): it polls for its
// next block for a while before it parks, and the caller polls for its end: signalling on
// channels would park and wake a goroutine per block (an idle processor has to be woken), which
// costs as much as stepping a block of cheap envs. Speed-ups per env: docs/BENCHMARKS.md.
// Errors are reported from the lowest-numbered failing block, so they do not depend on scheduling.
// `Close` stops the workers and waits for them (tested for goroutine leaks). Every action is checked
// before any env steps, so a bad action leaves the batch untouched.
//
// # Normalisation and departures
//
// Normalisation state (`RunningMeanStd{Mean, Var, Count}`, JSON-tagged) is read with `Stats()`
// and restored with `SetStats()`, `SetUpdate(false)` freezes it for evaluation. Updates follow
// Gymnasium (Chan et al. parallel update with a batch of one, prior count 1e-4); NormalizeReward's
// discounted return is kept in float64 and exposed through `Return`/`SetReturn`.
//
// Departures, and why.
//   - `box2d.LunarLanderConfig`'s zero value is not the default (build it with
//     `DefaultLunarLanderConfig()`): `wind_power = 0` and `turbulence_power = 0` are meaningful values
//     in Gymnasium, so zero cannot stand for "default 15 / 1.5". `env.Make` applies Gymnasium's
//     defaults through keywords, so most users never see the struct. Every other config here
//     (`PendulumConfig`, `AcrobotConfig`, `AsyncOptions`, `BenchConfig`) follows "zero means default".
//   - `AsyncVector` takes no `context.Context`: it owns its goroutines, `Close` stops them and waits
//     (leak-tested), and a step is bounded work, so there is nothing for a context to cancel. Bench
//     functions do take a context.
//   - LunarLander lives in `env/box2d` to keep the ByteArena
//     dependency out of `env/classic`.
//   - A heuristic controller is exported (`box2d.Heuristic`) rather than kept in a test file: Gymnasium
//     exports it too, and it makes a handy baseline policy for smoke runs.
package env
