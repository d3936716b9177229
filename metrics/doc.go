// Package metrics records a training run: the rolling episode statistics,
// metrics.csv, summary.json, curve.png and the progress display of
// `herd train`.
//
// # How it fits
//
// An algorithm reports to an algo.Logger; Recorder is the implementation the
// CLI, `herd bench learn`, tests and examples hand it. metrics sits below
// algo (it imports neither algo nor env): Options carries the few run facts
// it prints.
//
// # The driving loop
//
//	rec, err := metrics.NewRecorder(metrics.Options{
//		Dir: "runs/ppo-CartPole-v1-1", Algo: "ppo", Env: "CartPole-v1", Seed: 1,
//		TotalSteps: 500000, LogEvery: 1000, Scalars: spec.Scalars,
//		Progress: os.Stderr, Bar: isTerminal,
//	})
//	// … Train calls rec.Episode / rec.Scalar / rec.Step …
//	summary, err := rec.Close(interrupted)
//
// # Files
//
//   - metrics.csv: one row each time Step reaches a multiple of LogEvery
//     (plus a last row on Close). Columns: step, wall_seconds, sps (average
//     since start), episodes (finished so far), return_mean_100,
//     return_std_100, length_mean_100 (over the last 100 episodes),
//     return_recent (mean return of the episodes finished since the previous
//     row), then one column per declared scalar ("losses/…", "charts/…").
//     An empty cell means "no value yet"; a scalar the algorithm set to NaN
//     or ±Inf is written as NaN, +Inf or -Inf. Only wall_seconds and sps depend
//     on the clock (WallColumns): every other byte is a function of the run
//     seed, and floats use the shortest round-trip form, so two runs with the
//     same seed can be compared with the wall columns dropped.
//   - summary.json: algo, env, seed, steps, planned_steps, wall_seconds,
//     sps, episodes, final_return_mean_100 (null if no episode finished),
//     final_return_std_100, final_length_mean_100, interrupted, and status
//     (completed, interrupted, diverged or failed) with its reason.
//   - curve.png: return_mean_100 against steps (gonum.org/v1/plot).
//   - events.out.tfevents.herd (EventsFile): the same rows for TensorBoard,
//     one event per row, tagged charts/sps, charts/episodes,
//     charts/return_mean_100, charts/return_std_100, charts/length_mean_100,
//     charts/return_recent and the declared scalars by name (metrics/tfevents).
//
// # Live metrics
//
// Options.Live (a RowSink) receives every row; metrics/prom's Live serves
// them to Prometheus (`herd train --metrics-addr`). The Prometheus client
// lives in metrics/prom, so that algo, which hands rows to a Recorder,
// compiles without it. EventsCurve draws a run's learning curve from its
// event file.
//
// # Progress
//
// With Bar set (the CLI sets it when stdout is a terminal) a
// schollz/progressbar bar shows steps, steps/s and the recent return;
// otherwise a plain line every LineEvery (5 s) suits logs and CI.
//
// # Costs and concurrency
//
// Episode, Scalar and Step are O(1) and allocation-free (BenchmarkRecorderStep);
// a row is formatted into a reused buffer. A Recorder belongs to the
// goroutine that trains, starts no goroutines, keeps its first I/O error and
// returns it from Close.
//
// # Determinism
//
// Rows are written when `Logger.Step` reaches a multiple of `log_every` — a function
// of steps, never of time — and numbers use strconv's shortest round-trip form. Only
// `wall_seconds` and `sps` depend on the clock (`metrics.WallColumns`,
// `metrics.DropWallColumns`). Every random stream comes from `internal/rng` with the
// roles `ppo/init`, `ppo/actor`, `ppo/minibatch`, `ppo/env` (and `a2c/…`), and every
// reduction runs in a fixed order, so the same seed gives an identical metrics.csv
// and identical weights (`TestPPODeterministic`, `TestA2CDeterministic`).
package metrics
