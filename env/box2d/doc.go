// Package box2d holds Gymnasium's Box2D environments on the pure-Go port
// github.com/ByteArena/box2d: LunarLander-v3, discrete and continuous
// (LunarLanderContinuous-v3), with wind and turbulence options.
//
// Build it through env.Make("LunarLander-v3") (TimeLimit 1000 steps) or
// NewLunarLander(DefaultLunarLanderConfig()).
//
// # Validation by behaviour
//
// Bit-exactness with Python is impossible: pybox2d runs Box2D in float32 and
// the Go port in float64, and a rigid-body simulation with contacts
// amplifies the difference within a few dozen steps. The port is validated
// by behaviour instead: Heuristic, Gymnasium's hand-written controller, must
// reach a mean return ≥ 200 over 100 seeded episodes, as it does in
// Gymnasium (TestHeuristic100: 238 discrete, 285 continuous); and the three
// endings (rest +100, crash −100, leaving the screen −100) are tested.
//
// # Box2D notes
//
// At the pinned commit a fixture's collision filter is zero (collides with
// nothing) unless set, so every fixture sets Filter explicitly: the ground
// is category 0x0001 with mask 0xFFFF, lander 0x0010 and legs 0x0020 with
// mask 0x0001, as in Gymnasium. Bodies point to their World, so the world
// is heap-allocated once per Reset and never copied.
//
// # Costs
//
// A step runs 180 velocity and 60 position iterations per 1/50 s, as
// Gymnasium asks (steps/s in docs/BENCHMARKS.md, "Environments"). The Box2D
// port allocates a few dozen times per World.Step (island and contact solver
// buffers); that cannot be removed without forking it. Reset builds a new
// world. An env is used by one goroutine; AsyncVector steps several in
// parallel.
//
// # Concurrency
//
// The Box2D port has process-wide mutable state: a lazily built contact
// registry (built once here, under a sync.Once, before the first env) and
// unsynchronised profiling counters that the simulation never reads. Normal
// builds step worlds in parallel; -race builds serialise Box2D calls with
// one mutex so the race detector checks herd's code rather than the
// library's counters (see sync.go).
//
// # Validation and Box2D's global state
//
// LunarLander is validated by behaviour (float64 Box2D vs pybox2d's float32 diverge within tens
// of steps): Gymnasium's heuristic controller, 100 seeded episodes, mean return 238 (discrete) and
// 285 (continuous), ≥ 200 as in Gymnasium (`TestHeuristic100`, 2 s in the default `go test`;
// under `-race` only the 10-episode `TestHeuristicSmoke` runs). The port
// follows v3: a fresh world per reset, wind phases drawn at reset, reset takes one no-op step.
// Exhaust particles are left out (they never collide with the lander, and Gymnasium only ages them
// while rendering). At the pinned ByteArena commit fixtures collide only when `Filter` is set, so
// every fixture sets it (ground 0x0001/0xFFFF, lander 0x0010/0x0001, legs 0x0020/0x0001). The Box2D
// port allocates ~25 times per `World.Step`; LunarLander is the one env that is not allocation-free.
//
// ByteArena Box2D has package-level mutable state, found by the race detector when AsyncVector
// stepped LunarLanders in parallel: (1) the contact-type registry is built lazily by the first
// contact in the process, unsynchronised — herd builds it once under a `sync.Once` before any
// LunarLander exists (`env/box2d/sync.go`); (2) profiling counters (`b2_gjkCalls`, `B2_toiCalls`,
// `B2_toiTime`…) are bumped unsynchronised in every distance/TOI query. They are word-sized and never
// read by the simulation, so parallel worlds compute the same physics, but `-race` flags them; in
// `-race` builds only, a process-wide mutex serialises Box2D calls (`race_on.go`; `race_off.go` is a
// no-op), so the detector keeps checking herd's own code and normal builds stay parallel. Forking the
// port to drop the counters would remove the need; copying its code is not allowed here.
package box2d
