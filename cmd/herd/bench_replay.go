package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// Placeholder until the replay work lands.
func newBenchReplayCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "replay",
		Short: "benchmark replay (not built yet)",
		RunE:  func(*cobra.Command, []string) error { return errors.New("bench replay: not built yet") },
	}
}
