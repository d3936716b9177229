package bench

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"herd/algo"
	"herd/env"
)

// newEnvCmd is `herd bench env`: env steps per second for a single
// env, a SyncVector and an AsyncVector (logic in env.Bench).
func newEnvCmd() *cobra.Command {
	var (
		cfg    env.BenchConfig
		ids    string
		asJSON bool
		// --scaling: AsyncVector with 1, 2, 4 … --workers workers instead.
		scaling bool
		rounds  int
	)
	cmd := &cobra.Command{
		Use:   "env",
		Short: "env steps/s: single env, SyncVector, AsyncVector",
		Long: `Measures env steps per second (summed over a vector's envs) for each env id:
a single env from env.Make (TimeLimit included), a SyncVector and an AsyncVector
of --num-envs envs, with random actions drawn in advance; each cell is the median
of --repeats interleaved measurements, with their min and max. Run with GOMAXPROCS=1
for the one-core figures; AsyncVector uses GOMAXPROCS workers unless --workers.
With --scaling it reports instead AsyncVector's speedup over 1 worker
(default envs CartPole-v1 and LunarLander-v3, 200ms runs).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := flagCheck{cmd: "bench env"}
			c.atLeast("num-envs", 1, int64(cfg.NumEnvs))
			c.atLeast("workers", 0, int64(cfg.Workers))
			c.atLeast("duration", 0, int64(cfg.Duration))
			c.atLeast("rounds", 1, int64(rounds))
			c.atLeast("repeats", 1, int64(cfg.Repeats))
			if err := c.err(); err != nil {
				return err
			}
			if ids != "" {
				cfg.IDs = strings.Split(ids, ",")
			}
			check := cfg.IDs
			if len(check) == 0 {
				check = env.IDs()
			}
			for _, id := range check {
				// A vector of --num-envs envs, sync and async in turn.
				if err := algo.CheckEnvsMemory(env.Maker{}, id, cfg.NumEnvs, fmt.Sprintf("--num-envs %d", cfg.NumEnvs)); err != nil {
					return fmt.Errorf("bench env: %w", err)
				}
			}
			if scaling {
				rows, err := env.BenchScaling(cmd.Context(), cfg, cfg.Workers, rounds)
				if err != nil {
					return err
				}
				return writeRows(cmd.OutOrStdout(), asJSON, rows)
			}
			rows, err := env.Bench(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			return writeRows(cmd.OutOrStdout(), asJSON, rows)
		},
	}
	f := cmd.Flags()
	f.StringVar(&ids, "envs", "", "comma-separated env ids (default: all registered)")
	f.IntVar(&cfg.NumEnvs, "num-envs", 16, "envs per vector")
	f.IntVar(&cfg.Workers, "workers", 0, "AsyncVector workers (0: GOMAXPROCS)")
	f.DurationVar(&cfg.Duration, "duration", 0, "time per measurement (0: 1s)")
	f.Uint64Var(&cfg.Seed, "seed", 1, "seed for envs and random actions")
	f.BoolVar(&asJSON, "json", false, "one JSON object per line")
	f.BoolVar(&scaling, "scaling", false, "AsyncVector speedup with 1, 2, 4, … --workers workers (default GOMAXPROCS), interleaved runs, medians")
	f.IntVar(&rounds, "rounds", 5, "rounds of interleaved runs for --scaling")
	f.IntVar(&cfg.Repeats, "repeats", 3, "measurements per cell, interleaved over the modes; the table shows min, median (steps_per_s) and max")
	return cmd
}
