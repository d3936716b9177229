// Package bench is `herd bench`: the commands that measure herd's hot
// paths (replay, nn, env, persist, hts, remote) and its learning (learn).
// Each command parses its flags, calls the measuring code of the package
// it measures (replay/bench, nn, env.Bench, replay/persist, run/hts,
// service/envsvc, service/replaysvc; learn's BenchLearn, in learnrun.go,
// trains configs with run's executors) and prints the rows with
// writeRows, as an aligned table or one JSON object per line, so that the
// table and --json always carry the same fields.
//
// The commands live here rather than in cmd/herd, as pebble's live in its
// tool package: cmd/herd only wires Command into its root.
//
// # Load and pinning
//
// bench learn --load N starts N busy-loop processes (this binary's hidden
// `herd bench spin`, SpinCommand) for each run, and --pin restricts the
// training process to a CPU list as taskset -c would; a test binary that
// calls startLoad must run the spin command itself when started with the
// arguments "bench", SpinCommand (see load_test.go's TestMain).
package bench
