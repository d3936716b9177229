// Command herd trains reinforcement-learning agents and benchmarks the
// machinery underneath them. Run `herd --help` for the commands.
//
// Exit status: 0 when the command did everything it promised (for train: a
// completed run whose files were all written); 130 when it was stopped by
// Ctrl-C or SIGTERM and everything it had to save was saved (train: the
// checkpoint and metrics of the interrupted run); 1 for any other failure,
// with the reason on stderr (bad input, a diverged run, a file that could
// not be written, a second Ctrl-C).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"herd/bench"
	"herd/internal/exitguard"
	"herd/launch"
	"herd/nn"
)

// Exit statuses (launch.ExitStatus maps errors to them).
const (
	exitOK          = launch.ExitOK
	exitFailed      = launch.ExitFailed
	exitInterrupted = launch.ExitInterrupted
)

func main() {
	ctx, stop := interruptContext(os.Stderr)
	defer stop()
	err := newRootCmd().ExecuteContext(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "herd:", err)
	}
	stop()
	os.Exit(exitCode(err))
}

// exitCode maps a command's error to the exit status: a cancellation that
// reached the top unmixed with any failure means a clean interruption
// (launch.ExitStatus, which worker processes report with too).
func exitCode(err error) int { return launch.ExitStatus(err) }

// interruptContext returns a context cancelled by the first SIGINT or
// SIGTERM, so long commands (train, bench, eval) stop at their next check,
// save what they must and exit. A second signal exits at once with
// exitFailed, saving nothing more. stop ends the signal handling.
func interruptContext(stderr *os.File) (ctx context.Context, stop func()) {
	var guard exitguard.Guard
	ctx, cancel := context.WithCancel(exitguard.With(context.Background(), &guard))
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-sigs:
			fmt.Fprintf(stderr, "\nherd: %v: stopping (saving what must be saved); interrupt again to exit at once\n", s)
			cancel()
		case <-done:
			return
		}
		select {
		case s := <-sigs:
			fmt.Fprintf(stderr, "herd: %v again: exiting at once, nothing more saved\n", s)
			guard.Wait() // a run directory's commit finishes first
			os.Exit(exitFailed)
		case <-done:
		}
	}()
	var stopped bool
	return ctx, func() {
		if !stopped {
			stopped = true
			signal.Stop(sigs)
			close(done)
			cancel()
		}
	}
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "herd",
		Short:         "herd trains reinforcement-learning agents, fast",
		SilenceUsage:  true,
		SilenceErrors: true,
		// An HERD_KERNELS value that names no kernel path, or one this CPU
		// lacks, stops every command rather than quietly running another.
		PersistentPreRunE: func(*cobra.Command, []string) error { return nn.KernelsErr() },
	}
	root.AddCommand(bench.Command(), newTrainCmd(), newEvalCmd(), newServeCmd(), newWorkerCmd(), newLaunchCmd(), newTuneCmd())
	for _, c := range root.Commands() {
		requireSubcommand(c)
	}
	return root
}

// requireSubcommand makes every command below c that only groups others
// (bench, serve, bench remote) fail on an unknown or missing subcommand:
// cobra would print the help and exit 0, as if something had been done.
func requireSubcommand(c *cobra.Command) {
	if c.HasSubCommands() && c.Run == nil && c.RunE == nil {
		c.Args = cobra.ArbitraryArgs
		c.RunE = func(cmd *cobra.Command, args []string) error {
			var names []string
			for _, sub := range cmd.Commands() {
				if sub.IsAvailableCommand() {
					names = append(names, sub.Name())
				}
			}
			if len(args) > 0 {
				return fmt.Errorf("unknown command %q for %q (commands: %s; see %s --help)",
					args[0], cmd.CommandPath(), strings.Join(names, ", "), cmd.CommandPath())
			}
			return fmt.Errorf("%s needs a command: %s (see %s --help)", cmd.CommandPath(), strings.Join(names, ", "), cmd.CommandPath())
		}
	}
	for _, sub := range c.Commands() {
		requireSubcommand(sub)
	}
}
