package main

import "github.com/spf13/cobra"

// benchCommands lists `herd bench` subcommands; each lives in its own file
// (bench_<area>.go) beside the package it measures.
func benchCommands() []*cobra.Command {
	return []*cobra.Command{
		newBenchReplayCmd(),
		newBenchNNCmd(),
		newBenchEnvCmd(),
		newBenchPersistCmd(),
		newBenchLearnCmd(),
		newBenchHTSCmd(),
		newBenchSpinCmd(),   // hidden: the busy loops of bench learn --load
		newBenchRemoteCmd(), // bench_remote.go (#16)
	}
}

// extraCommands lists the top-level commands besides bench.
func extraCommands() []*cobra.Command {
	return []*cobra.Command{
		newTrainCmd(),
		newEvalCmd(),
		newServeCmd(),  // serve.go (#16)
		newWorkerCmd(), // distributed runs (#13)
		newLaunchCmd(), // distributed runs (#13)
		newTuneCmd(),   // tune.go (#15)
	}
}
