// Package tune chooses how many actors and learners a PAL run should use,
// by the design-space exploration of "Parallel Actors and Learners" (PAL,
// §5, eq. 5 and Fig. 12): measure actor throughput f_a(x) (env steps/s with
// x actors) and learner throughput f_l(x) (updates/s with x learners), fit
// both, and pick x_a + x_l ≤ cores where the actors feed the learners
// exactly, f_a(x_a) = U · f_l(x_l), U being the env steps per update that
// the rate limiter holds.
//
// Deciding is separate from doing, as in pebble's compaction picker: Fit,
// Search and Choose are pure functions of measured curves, so they are
// tested on given tables; Explore (`herd tune`) measures with short real
// runs (run/pal), calls them, and writes the table, the plot (Plot) and a
// config with the choice.
//
// # The search
//
// Under the rate limiter the run proceeds at
//
//	R(x_a, x_l) = min(f_a(x_a), U · f_l(x_l))   env steps/s,
//
// the slower side throttling the faster. Search solves eq. 5 as the paper
// does (§V-D, §VI-F): exhaustively, over the measured points, every
// allocation with x_a, x_l ≥ 1 and x_a + x_l ≤ cores, maximising R; among
// allocations within 1% of the best it takes the one with the fewest
// workers (equality in eq. 5 is where neither side has idle workers).
// Measured curves fall once the workers outnumber the cores, which a fit
// cannot follow, so the curves are never replaced by a fit where a point
// was measured.
//
// Each curve is also fitted with Amdahl's law, f(x) = f(1)·x / (1 + s·(x−1)),
// whose serial fraction s absorbs what parallel workers share (the replay
// buffer's locks, the parameter service, memory bandwidth, the cores
// themselves). The fits are plotted, and used only for counts beyond the
// largest measured one: such allocations are marked Predicted in the table.
// Choose ranks allocations on the fits alone.
package tune
