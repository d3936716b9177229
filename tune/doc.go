// Package tune chooses how many actors and learners a PAL run should use,
// by the design-space exploration of "Parallel Actors and Learners" (PAL,
// §5, eq. 5 and Fig. 12): measure actor throughput f_a(x) (env steps/s with
// x actors) and learner throughput f_l(x) (updates/s with x learners), and
// pick, among the measured points, x_a + x_l ≤ cores where the actors feed
// the learners exactly, f_a(x_a) = U · f_l(x_l), U being the env steps per
// update that the rate limiter holds; ranked by the configured run's
// predicted wall time, which adds the warm-up to eq. 5 (below).
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
// the slower side throttling the faster. Search enumerates eq. 5 as the
// paper does (§V-D, §VI-F): exhaustively, over the measured points, every
// allocation with x_a, x_l ≥ 1 and x_a + x_l ≤ cores. Measured curves fall
// once the workers outnumber the cores, which a fit cannot follow, so the
// curves are never replaced by a fit where a point was measured.
//
// # Where it departs from eq. 5: the run's time, not its steady rate
//
// PAL maximises R, the steady-state rate. A run is not all steady state:
// its first W = learning_starts env steps (Run.WarmUp) make no update, so
// only the actors work and the rate limiter does not hold them. Search
// ranks allocations by the predicted wall time of the configured run of S
// env steps,
//
//	T(x_a, x_l) = W / f_a(x_a) + (S − W) / R(x_a, x_l),
//
// shortest first, which is what `herd bench learn` and
// scripts/pal-sweep.sh measure (env steps / wall seconds of the whole
// run). With W = 0 the order is R's, eq. 5's; the warm-up term only
// separates allocations that eq. 5 finds (nearly) equal, or favours more
// actors when the warm-up is a large share of the run's time (W / S large
// and f_a not far above U · f_l, e.g. slow envs with U = 1). Among
// allocations whose T is within a tie band of the shortest (Run.Tie), the
// one with the fewest workers is taken: the measurements cannot tell them
// apart, and equality in eq. 5 is where neither side has idle workers.
// The band is 1% by default; `herd tune` measures every count in several
// rounds that alternate the counts, uses each point's median, and widens
// the band to the largest spread among the points (Summary: half the range
// over the median), at most 5% (Band, MaxTie), so that a choice rests on
// differences larger than the noise the measurements showed and is never
// below 95% of the best predicted rate. What the model leaves out decides
// between tied allocations of the chosen worker count (Pick): `herd tune`
// writes the one with the most actors, then the fewest learners
// (MostActors: surplus actors keep the learners fed at the rate limiter's
// hand-offs), or with
// --joint-rounds N runs each as a whole PAL run of the planned steps, N
// times alternating (pal.MeasureJoint), and takes the fastest by median. Not modelled,
// since the measured curves do not show them: the set-up before the first
// step (milliseconds), the hand-offs between actors and learners at the
// rate limiter, and the actors' and learners' competition for cores when
// x_a + x_l exceeds the cores the machine really has (or other work takes
// them): f_a is measured with no learner, f_l with a stand-in for the
// actors that takes no env steps.
//
// Each curve is also fitted with Amdahl's law, f(x) = f(1)·x / (1 + s·(x−1)),
// whose serial fraction s absorbs what parallel workers share (the replay
// buffer's locks, the parameter service, memory bandwidth, the cores
// themselves). The fits are plotted, and used only for counts beyond the
// largest measured one: such allocations are marked Predicted in the table.
// Choose ranks allocations on the fits alone.
package tune
