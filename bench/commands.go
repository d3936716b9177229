package bench

import (
	"strings"

	"github.com/spf13/cobra"
)

// Command returns `herd bench` with every subcommand, one a file of this
// package (env.go, replay.go, …), each calling into the package it
// measures.
func Command() *cobra.Command {
	bench := &cobra.Command{Use: "bench"}
	var names []string
	for _, c := range []*cobra.Command{
		newReplayCmd(),
		newNNCmd(),
		newEnvCmd(),
		newPersistCmd(),
		newLearnCmd(),
		newHTSCmd(),
		newSpinCmd(), // hidden: the busy loops of bench learn --load
		newRemoteCmd(),
	} {
		bench.AddCommand(c)
		names = append(names, c.Name())
	}
	// Built from the subcommands, so that `herd --help` lists every one.
	bench.Short = "measure herd's hot paths and learning (" + strings.Join(names, ", ") + ")"
	return bench
}
