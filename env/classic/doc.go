// Package classic holds exact Go ports of Gymnasium's classic-control
// environments: CartPole (v0/v1), Pendulum-v1, MountainCar-v0,
// MountainCarContinuous-v0 and Acrobot-v1 ("book" and "nips" dynamics).
//
// CartPoleNoVel-v1 and PendulumNoVel-v1 are rl-zoo's partially observed
// variants (its MaskVelocityWrapper, the ids SB3-contrib's RecurrentPPO is
// tuned on): the same envs with the velocity entries of every observation
// zero (CartPole's ẋ and θ̇, Pendulum's θ̇; the shapes unchanged), so that a
// policy has to infer the velocities from the observations it has seen
// (CartPoleConfig.NoVel, PendulumConfig.NoVel).
//
// Most users build them through env.Make("CartPole-v1"), which adds
// Gymnasium's TimeLimit; the constructors here (NewCartPole, …) give the bare
// env, with typed configs for Gymnasium's keywords.
//
// # Exactness
//
// The dynamics match Gymnasium's to 1e-12 in float64 (state and reward) and
// exactly on terminated: each step evaluates the published equations in
// float64, in Python's order of operations, with constants computed at run
// time as Python computes them (so 12·2·π/360 is the same float64). The quirks
// that matter:
//
//   - CartPole: explicit Euler (positions advance with the OLD velocities);
//     l = 0.5 is HALF the pole; reward +1 also on the terminating step.
//   - Pendulum: the reward comes from the PRE-step state; θ is never
//     wrapped in the state (only inside the cost); torque clipped to ±2.
//   - MountainCar: velocity clipped before the position update; the left
//     wall zeroes a negative velocity.
//   - MountainCarContinuous: goal 0.45; the state is rounded to float32
//     after each step; the reward penalises the UNCLIPPED action.
//   - Acrobot: one RK4 step of 0.2 s with the torque as a fifth state;
//     angles wrapped into [−π, π] by ±2π loops; θ̇ clipped to 4π and 9π;
//     the reset state is rounded to float32.
//
// The tests check 1,000s of random transitions and the hand-picked ones in
// testdata/golden against a 160-bit (math/big) evaluation of the same
// equations written independently in reference_test.go.
//
// What cannot match: NumPy's random stream. Reset draws from the same ranges
// with herd's PCG streams (internal/rng), so episodes start elsewhere than
// in Python for the same seed.
//
// # State
//
// Every env implements env.Stater (StateTo, SetState), Python's
// env.unwrapped.state. SetState also makes the env steppable, so a test can
// take one step from any state.
//
// # Costs and concurrency
//
// A step allocates nothing and costs ~40 ns (CartPole, MountainCar) to
// ~350 ns (Acrobot's four derivative evaluations) on one core; see
// BenchmarkCartPole and `herd bench env`. An env is used by one goroutine.
//
// # Exactness
//
// Exactness of the classic ports: float64 state, Python's
// order of operations, constants computed at run time as Python computes them (Go folds constant
// expressions exactly, which could differ from Python's `12*2*math.pi/360` in the last bit — the
// tests pin these constants to Python's printed values). Tests compare thousands of random
// transitions and the hand-picked ones in `env/classic/testdata/golden` (datadriven) against an
// independent 160-bit `math/big` evaluation of the published equations, with `sin`/`cos` from their
// Taylor series: agreement to 1e-12 and exact `terminated`. Two deliberate departures from *some*
// Gymnasium runs, both documented in the env docs: (1) actions are float32 widened exactly to
// float64, and all arithmetic is float64 — Gymnasium under NumPy 2 computes Pendulum's `u` terms and
// MountainCarContinuous's force term in float32 when handed a float32 array, NumPy 1 and float64
// actions do not; we match the float64 semantics; (2) reset draws come from herd's PCG streams,
// not NumPy's, so the same seed starts episodes elsewhere than Python.
package classic
