package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// Placeholder until the learn work lands.
func newBenchLearnCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "learn",
		Short: "benchmark learn (not built yet)",
		RunE:  func(*cobra.Command, []string) error { return errors.New("bench learn: not built yet") },
	}
}
