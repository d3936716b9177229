// Package tune chooses how many actors and learners a PAL run should use,
// by the design-space exploration of "Parallel Actors and Learners" (PAL,
// §5, eq. 5 and Fig. 12): measure actor throughput f_a(x) (env steps/s with
// x actors) and learner throughput f_l(x) (updates/s with x learners), fit
// both, and pick x_a + x_l ≤ cores where the actors feed the learners
// exactly, f_a(x_a) = U · f_l(x_l), U being the env steps per update that
// the rate limiter holds.
//
// Deciding is separate from doing, as in pebble's compaction picker: Fit and
// Choose are pure functions of measured curves, so they are tested on
// made-up curves; `herd tune` measures with short real runs (run/pal), calls
// them, and writes the table, the plot (Plot) and a config with the choice.
//
// # The model
//
// Each curve is fitted with Amdahl's law, f(x) = f(1)·x / (1 + s·(x−1)),
// whose serial fraction s absorbs what parallel workers share (the replay
// buffer's locks, the parameter service, memory bandwidth, and on a small
// machine the cores themselves). Under the rate limiter the run proceeds at
//
//	R(x_a, x_l) = min(f_a(x_a), U · f_l(x_l))   env steps/s,
//
// the slower side throttling the faster; Choose maximises R over every
// allocation with x_a, x_l ≥ 1 and x_a + x_l ≤ cores, and among allocations
// within 1% of the best takes the one with the fewest workers (equality in
// eq. 5 is where neither side has idle workers).
package tune
