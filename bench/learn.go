package bench

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
)

func newLearnCmd() *cobra.Command {
	var (
		configs  []string
		seedList string
		steps    int64
		out, md  string
		set      []string
		target   float64
		asJSON   bool
		evalEps  int
		force    bool
		load     int
		pins     []string
	)
	cmd := &cobra.Command{
		Use:   "learn",
		Short: "train (config, seed) pairs and tabulate final return, wall seconds and steps/s",
		Long: `learn trains every --config with every seed, one run at a time, and prints one row
per run; --md writes the markdown tables of docs/BENCHMARKS.md (final
return = mean of the last 100 episodes; target = the env's reward threshold
unless --target is given).

--load N starts N busy-loop processes for the duration of each run (the
cores shared with other work); --pin runs each (config, seed) once per
CPU list given, in turn, with the training process restricted to those CPUs
as taskset -c would (GOMAXPROCS included) while the busy loops keep every
CPU, and ends with the mean wall time per list and its ratio to the last.`,
		Example: `  herd bench learn --config configs/ppo-cartpole.yaml --seeds 1-5 --md /tmp/ppo.md
  herd bench learn --config configs/ppo-cartpole.yaml --config configs/a2c-cartpole.yaml --seeds 1,2
  herd bench learn --config configs/dqn-cartpole.yaml --steps 100000 --seeds 1,1,1 --load 2 --pin all --pin 0`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			seeds, err := parseSeeds(seedList)
			if err != nil {
				return err
			}
			c := flagCheck{cmd: "bench learn"}
			if cmd.Flags().Changed("steps") {
				c.atLeast("steps", 1, steps)
			}
			c.atLeast("eval-episodes", 0, int64(evalEps))
			if cmd.Flags().Changed("target") {
				c.finite("target", target, -math.MaxFloat64, math.MaxFloat64)
			}
			if err := c.err(); err != nil {
				return err
			}
			sched, err := newLoadSchedule(load, pins)
			if err != nil {
				return err
			}
			if md != "" && len(sched.pins) > 1 {
				return fmt.Errorf("bench learn: --md takes one --pin setting, got %d", len(sched.pins))
			}
			w := cmd.OutOrStdout()
			rows, lrows, err := sched.run(cmd.Context(), configs, seeds, LearnOptions{
				Steps: steps, Out: out, Force: force, Set: set, Progress: cmd.ErrOrStderr(), EvalEpisodes: evalEps})
			if len(rows) > 0 {
				var werr error
				if sched.active() {
					werr = writeRows(w, asJSON, lrows)
					if werr == nil && len(sched.pins) > 1 {
						werr = writePinRatios(cmd.ErrOrStderr(), lrows, sched.pins)
					}
				} else {
					werr = writeRows(w, asJSON, rows)
				}
				if werr != nil {
					return werr
				}
				if md != "" {
					f, ferr := os.Create(md)
					if ferr != nil {
						return fmt.Errorf("bench learn: %w", ferr)
					}
					if werr := WriteLearnMarkdown(f, rows, target); werr != nil {
						f.Close()
						return fmt.Errorf("bench learn: %w", werr)
					}
					if cerr := f.Close(); cerr != nil {
						return fmt.Errorf("bench learn: %w", cerr)
					}
				}
			}
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringArrayVar(&configs, "config", nil, "config file (repeatable)")
	fl.StringVar(&seedList, "seeds", "1-5", "seeds: a list (1,2,3) or a range (1-5)")
	fl.Int64Var(&steps, "steps", 0, "override every config's steps")
	fl.StringVar(&out, "out", "", "write each run's directory under this folder, as ALGO-ENV-SEED (under pin-P/ with several --pin, under rep-N/ when a seed repeats; default: no files)")
	fl.BoolVar(&force, "force", false, "replace runs already under --out")
	fl.StringVar(&md, "md", "", "write markdown tables to this file")
	fl.StringArrayVar(&set, "set", nil, "algorithm override key=value applied to every config (repeatable)")
	fl.Float64Var(&target, "target", math.NaN(), "return target (default: the env's reward threshold)")
	fl.BoolVar(&asJSON, "json", false, "one JSON object per line instead of a table")
	fl.IntVar(&evalEps, "eval-episodes", 0, "also evaluate each trained policy greedily for this many episodes")
	fl.IntVar(&load, "load", 0, "run this many busy-loop processes during each run")
	fl.StringArrayVar(&pins, "pin", nil, "run each (config, seed) with the training process on these CPUs (taskset -c list, or all); repeatable: once per list, in turn")
	return cmd
}

// parseSeeds reads "1,2,3", "1-5" or a mix ("1-3,7").
func parseSeeds(s string) ([]uint64, error) {
	var seeds []uint64
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.ParseUint(lo, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("bench learn: --seeds %q: %w", s, err)
		}
		b := a
		if isRange {
			if b, err = strconv.ParseUint(hi, 10, 64); err != nil || b < a || b-a > 1000 {
				return nil, fmt.Errorf("bench learn: --seeds %q: bad range %q", s, part)
			}
		}
		for x := a; x <= b; x++ {
			seeds = append(seeds, x)
		}
	}
	return seeds, nil
}
