// Command herd trains reinforcement-learning agents and benchmarks the
// machinery underneath them. Run `herd --help` for the commands.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	// The first Ctrl-C cancels the context so long jobs (train, bench) can
	// save and exit cleanly; a second one kills the process as usual.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRootCmd().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "herd:", err)
		os.Exit(1)
	}
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "herd",
		Short:         "herd trains reinforcement-learning agents, fast",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newBenchCmd())
	for _, c := range extraCommands() {
		root.AddCommand(c)
	}
	return root
}

func newBenchCmd() *cobra.Command {
	bench := &cobra.Command{
		Use:   "bench",
		Short: "measure herd's hot paths (replay, nn, env, persist, learn)",
	}
	for _, c := range benchCommands() {
		bench.AddCommand(c)
	}
	return bench
}
