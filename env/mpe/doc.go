// Package mpe holds exact Go ports of three of PettingZoo 1.24.3's
// Multi-Agent Particle Environments: simple_spread_v3, simple_tag_v3 and
// simple_reference_v3, as parallel multi-agent envs (env.Parallel).
//
// Most users build them through env.MakeParallel("mpe/simple_spread_v3")
// (or env.Make / env.MakeVector for shared-parameter training, see package
// env, "Multi-agent envs"); the constructors here (NewSimpleSpread, …) take
// typed configs for PettingZoo's keywords (N, local_ratio, max_cycles,
// continuous_actions, num_good, num_adversaries, num_obstacles).
//
// # Exactness
//
// Each step evaluates PettingZoo's world physics (core.py: action forces,
// the softplus contact force over every pair of colliding entities,
// explicit Euler with damping 0.25 and dt 0.1, the speed cap of
// simple_tag) and the scenarios' rewards and observations in float64, in
// NumPy's order of operations. The details that matter:
//
//   - positions advance with the OLD velocity, then the velocity is damped
//     and the force added;
//   - the contact force is 100·Δ/|Δ|·k·logaddexp(0, −(|Δ| − r)/k), k = 1e-3,
//     computed as NumPy's npy_logaddexp does;
//   - continuous actions are clipped to [0, 1] (PettingZoo's
//     ClipOutOfBoundsWrapper) and the movement is the float32 differences
//     a[2] − a[1] and a[4] − a[3] (NumPy subtracts two float32 scalars in
//     float32), times the agent's acceleration (5, or 3 and 4 in
//     simple_tag);
//   - a discrete action of an agent that speaks is move + 5·symbol;
//   - observations are computed in float64 and cast to float32.
//
// TestExactPettingZoo replays tables PettingZoo's own code wrote
// (testdata/gen/gen_tables.py, run with Debian's NumPy and pygame and a
// minimal stand-in for the few Gymnasium names PettingZoo imports, none of
// them part of the dynamics): 4,530 steps over six configurations
// (discrete and continuous, default and non-default keywords), with every
// episode end and, for simple_reference, the communication channel; every
// observation, reward, termination, truncation and world state matches to
// 1e-12.
//
// What cannot match: NumPy's random stream. Reset draws the same
// distributions (uniform positions, uniform goal landmarks) from herd's
// PCG streams, so episodes start elsewhere than in Python for the same
// seed; the tables set the world PettingZoo drew (SetState).
//
// MPE continues as the separate MPE2 package (mpe2); this package follows
// PettingZoo 1.24.3, the last release that ships pettingzoo.mpe. MPE2 1.1.0
// (github.com/Farama-Foundation/MPE2 at dbd68d2) replays all six tables with
// no difference at all (testdata/gen/check_mpe2.py), so with default
// keywords these ports are also MPE2's; MPE2's new keywords
// (dynamic_rescaling, curriculum, terminate_on_success, neighbour limits,
// benchmark_data) are not ported.
//
// # Costs and concurrency
//
// A step allocates nothing; simple_spread and simple_tag cost more than
// simple_reference (a softplus contact force per pair of colliders).
// BenchmarkStep and testdata/gen/bench_pettingzoo.py compare them with
// PettingZoo's parallel_env (docs/BENCHMARKS.md, "Multi-agent"). An Env is used by one goroutine.
package mpe
