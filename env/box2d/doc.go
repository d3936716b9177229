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
// One step costs ~50–65 µs on one core (≈15–20k steps/s): 180 velocity and
// 60 position iterations per 1/50 s, as Gymnasium asks. The Box2D port
// allocates ~25 times (~6 KB) per World.Step (island and contact solver
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
package box2d
