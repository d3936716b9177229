package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// Placeholders until the training work lands.
func newTrainCmd() *cobra.Command {
	return &cobra.Command{Use: "train", Short: "train an agent (not built yet)",
		RunE: func(*cobra.Command, []string) error { return errors.New("train: not built yet") }}
}

func newEvalCmd() *cobra.Command {
	return &cobra.Command{Use: "eval", Short: "evaluate a trained agent (not built yet)",
		RunE: func(*cobra.Command, []string) error { return errors.New("eval: not built yet") }}
}
