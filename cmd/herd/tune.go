package main

// herd tune: PAL's design-space exploration (logic in herd/tune).

import (
	"fmt"
	"runtime"
	"time"

	"github.com/spf13/cobra"

	"herd/algo/all"
	"herd/tune"
)

func newTuneCmd() *cobra.Command {
	var o tune.ExploreOptions
	cmd := &cobra.Command{
		Use:   "tune",
		Short: "choose the numbers of PAL actors and learners from measured throughput (PAL eq. 5)",
		Long: `tune measures actor throughput f_a(x) (env steps/s of x actors with no learner)
and learner throughput f_l(x) (updates/s of x learners on one pre-filled replay)
for x = 1 … cores−1 with short real runs (the budget is split evenly over them)
and solves PAL's eq. 5 on the measurements by exhaustive search: every
x_a + x_l ≤ cores, in steady state at R = min(f_a(x_a), U·f_l(x_l)), U being
the algorithm's env steps per update. It picks the allocation whose run it
predicts to end first: the first W = learning_starts env steps have no
learner work and go at f_a(x_a), the other S − W at R, so
T = W/f_a(x_a) + (S − W)/R for the config's S steps (or --steps). Each count
is measured --rounds times, the counts alternating, and its median used;
allocations whose T is within the largest spread of the measurements (half
their range over the median, at least 1%, at most 5%) of the shortest tie,
the fewest workers among them, and of those with that many workers the one
with the most actors (then the fewest learners) wins:
the model leaves out the hand-offs at the rate limiter, where surplus actors
keep the learners fed. With --joint-rounds > 0 each tied allocation instead
runs as a whole PAL run of the planned steps, --joint-rounds times,
alternating, and the fastest by median wins. Without a warm-up and with that
band at 1% the model's ranking is eq. 5's. Amdahl fits of both curves are printed and
plotted beside the points; they would be used only for counts beyond the
measured ones, marked as predictions. It prints the table and the choice and writes
fig12.png and <config>-tuned.yaml (the config with runtime: {executor: pal,
actors, learners}) into --out.

f_l(x) is measured on the executor's own learner side: x learners in the
config's runtime.learner_mode (async unless it says sync) with the parameter
service applying their gradients, fed by the rate limiter; the written config
keeps the other runtime keys (learner_mode among them).`,
		Example: `  herd tune --config configs/dqn-cartpole-pal.yaml --cores 4 --budget 30s --out /tmp/tune`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("steps") && o.Steps < 1 {
				return fmt.Errorf("tune: --steps must be ≥ 1, got %d", o.Steps)
			}
			o.Specs, o.Envs = all.Specs(), envMaker()
			return tune.Explore(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Config, "config", "", "run config of an off-policy algorithm (required)")
	f.IntVar(&o.Cores, "cores", runtime.NumCPU(), "cores to allocate: actors + learners ≤ cores")
	f.DurationVar(&o.Budget, "budget", 60*time.Second, "time for the throughput measurements (whole runs of tied allocations come on top)")
	f.StringVar(&o.Out, "out", ".", "directory for fig12.png and the tuned config")
	f.IntVar(&o.Rounds, "rounds", 3, "measure every count this many times, alternating counts, and take the median")
	f.IntVar(&o.JointRounds, "joint-rounds", 0, "run the allocations the model ties as whole runs this many times each and choose the fastest (0: the most actors)")
	f.Int64Var(&o.Steps, "steps", 0, "env steps of the run to plan for (default: the config's; the written config keeps its own)")
	return cmd
}
