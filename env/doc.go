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
// IDs lists the registered ids (CartPole-v0/v1, Pendulum-v1, MountainCar-v0,
// MountainCarContinuous-v0, Acrobot-v1, LunarLander-v3,
// LunarLanderContinuous-v3); SpecOf gives max_episode_steps and the reward
// threshold. The envs themselves live in env/classic and env/box2d.
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
// # Seeding
//
// Reset(seed) with seed ≥ 0 reseeds the env's stream from internal/rng;
// Reset(NoSeed) continues it. The same seed gives the same episodes. Reset
// distributions follow Gymnasium's ranges but not NumPy's bit stream (no Go
// program can reproduce that), so episodes differ from Python's while their
// dynamics match it to 1e-12.
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
// An id of the form grpc://HOST:PORT/ID (grpcs:// for TLS) makes Make and
// MakeVector open the env on a server speaking herd's protocol
// (proto/herd/v1/env.proto): `herd serve env` for herd's own envs, or
// `python3 -m herd_env.serve` for any Gymnasium-style Python env. A
// RemoteVector steps all its envs with one message per batch, or with
// ?inflight=K splits them over K sessions whose messages travel together
// (same results, bit for bit, for every K); every call has a deadline
// (?timeout=30s), so a dead server is an error, never a hang. On the same
// Linux host, shm://NAME/ID reaches `python3 -m herd_env.serve --shm NAME`
// or `herd serve env --shm NAME` through shared memory: the batch's arrays live in a memfd segment both
// processes map, and one Unix-socket byte each way wakes the other side
// (tens of microseconds per message instead of hundreds over gRPC). See
// remote.go for the id's parameters and how errors map back to this
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
// by a one-hot agent id and the joint observation), so every single-agent
// algorithm trains one policy shared by all agents (parameter sharing).
// MakeVector does this for a multi-agent id: n counts ROWS and must be a
// multiple of the number of agents; "agent_id=true" and "state=true" in the
// id choose the extra columns. Make gives a TurnEnv, where agents take
// turns and the reward is the team's (used by evaluation and checkpoint
// loading). Agents that leave before the others are "dead rows" until the
// episode ends (zero observation and reward, counted by DeadRowSteps).
//
// # Costs and concurrency
//
// A classic-control Step costs tens of nanoseconds and allocates nothing;
// wrappers add a few nanoseconds each. An Env and a Vector are driven by one
// goroutine. AsyncVector owns its worker goroutines; Close stops them and
// waits. Errors are the package sentinels (ErrInvalidAction, ErrNeedsReset,
// ErrUnknownID, ErrInvalidOption, ErrInvalidState, ErrClosed), wrapped with
// context; match them with errors.Is.
package env
