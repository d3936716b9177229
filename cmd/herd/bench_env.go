package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// Placeholder until the env work lands.
func newBenchEnvCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "env",
		Short: "benchmark env (not built yet)",
		RunE:  func(*cobra.Command, []string) error { return errors.New("bench env: not built yet") },
	}
}
