package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// Placeholder until the nn work lands.
func newBenchNNCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "nn",
		Short: "benchmark nn (not built yet)",
		RunE:  func(*cobra.Command, []string) error { return errors.New("bench nn: not built yet") },
	}
}
