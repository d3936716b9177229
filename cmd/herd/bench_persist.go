package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// Placeholder until the persist work lands.
func newBenchPersistCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "persist",
		Short: "benchmark persist (not built yet)",
		RunE:  func(*cobra.Command, []string) error { return errors.New("bench persist: not built yet") },
	}
}
