package main

// herd tune (#15): PAL's design-space exploration.

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v4"

	"herd/algo"
	"herd/algo/all"
	"herd/run/pal"
	"herd/tune"
)

func newTuneCmd() *cobra.Command {
	var (
		config string
		cores  int
		budget time.Duration
		out    string
		steps  int64
		rounds int
	)
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
their range over the median, at least 1%, at most 50%) of the shortest tie,
and the fewest workers among them win. Without a warm-up and with that band
at 1% this is eq. 5's choice. Amdahl fits of both curves are printed and
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
			if config == "" {
				return fmt.Errorf("tune: --config is required")
			}
			if cores < 2 || cores > 1024 {
				return fmt.Errorf("tune: --cores must be in [2, 1024], got %d", cores)
			}
			if budget < 100*time.Millisecond || budget > 24*time.Hour {
				return fmt.Errorf("tune: --budget must be in [100ms, 24h], got %v", budget)
			}
			if rounds < 1 || rounds > 100 {
				return fmt.Errorf("tune: --rounds must be in [1, 100], got %d", rounds)
			}
			// Each of the 2 × (cores−1) × rounds measurements needs time
			// for a few updates; shorter ones would only report that none
			// happened.
			const minEach = 50 * time.Millisecond
			if n := time.Duration(2 * (cores - 1) * rounds); budget/n < minEach {
				return fmt.Errorf("tune: --budget %v split over the %d measurements of --cores %d, --rounds %d leaves %v each; "+
					"each needs at least %v: give --budget %v or more, or fewer --cores or --rounds", budget, n, cores, rounds, budget/n, minEach, minEach*n)
			}
			data, err := os.ReadFile(config)
			if err != nil {
				return fmt.Errorf("tune: %w", err)
			}
			res, err := algo.Resolve(data, all.Specs(), algo.Overrides{})
			if err != nil {
				return fmt.Errorf("tune: %s: %w", config, err)
			}
			shape, ok := res.Config.(algo.TransitionShape)
			if !ok {
				return fmt.Errorf("tune: %w: %s is not off-policy (PAL runs DQN, SAC, TD3, DDPG)", algo.ErrConfig, res.Spec.Name)
			}
			_, u := shape.TransitionShape()
			run := tune.Run{U: u, Steps: res.Header.Steps}
			if cmd.Flags().Changed("steps") {
				if steps < 1 {
					return fmt.Errorf("tune: --steps must be ≥ 1, got %d", steps)
				}
				run.Steps = steps
			}
			if wu, ok := res.Config.(algo.WarmUpper); ok {
				run.WarmUp = wu.WarmUp()
			}
			if err := os.MkdirAll(out, 0o755); err != nil {
				return fmt.Errorf("tune: %w", err)
			}
			w := cmd.OutOrStdout()
			// Rounds alternate the counts, so a burst of other work on the
			// machine hits one round of every count rather than every
			// round of one count; each point is the median of its rounds,
			// and the largest spread among them widens the tie band.
			each := budget / time.Duration(2*(cores-1)*rounds)
			ya, yl := make([][]float64, cores-1), make([][]float64, cores-1)
			for range rounds {
				for x := 1; x < cores; x++ {
					fa, err := pal.MeasureActors(cmd.Context(), res.Header, res.Spec, res.Config, x, each)
					if err != nil {
						return fmt.Errorf("tune: actors %d: %w", x, err)
					}
					fl, err := pal.MeasureLearners(cmd.Context(), res.Header, res.Spec, res.Config, x, each)
					if err != nil {
						return fmt.Errorf("tune: learners %d: %w", x, err)
					}
					ya[x-1], yl[x-1] = append(ya[x-1], fa), append(yl[x-1], fl)
				}
			}
			var pa, pl []tune.Point
			var sa, sl []float64
			spread := 0.0
			for i := range ya {
				ma, da, err := tune.Summary(ya[i])
				if err != nil {
					return fmt.Errorf("tune: actors %d: %w", i+1, err)
				}
				ml, dl, err := tune.Summary(yl[i])
				if err != nil {
					return fmt.Errorf("tune: learners %d: %w", i+1, err)
				}
				pa, pl = append(pa, tune.Point{X: i + 1, Y: ma}), append(pl, tune.Point{X: i + 1, Y: ml})
				sa, sl = append(sa, da), append(sl, dl)
				spread = max(spread, da, dl)
			}
			run.Tie = min(max(spread, 0.01), 0.5)
			fa, err := tune.Fit(pa)
			if err != nil {
				return fmt.Errorf("tune: actors: %w", err)
			}
			fl, err := tune.Fit(pl)
			if err != nil {
				return fmt.Errorf("tune: learners: %w", err)
			}
			allocs, err := tune.Search(pa, pl, fa, fl, run, cores)
			if err != nil {
				return fmt.Errorf("tune: %w", err)
			}
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintf(tw, "x\tf_a(x) env steps/s\t±\tf_l(x) updates/s\t±\tU·f_l(x) env steps/s\t\n")
			for i := range pa {
				fmt.Fprintf(tw, "%d\t%.0f\t%.0f%%\t%.0f\t%.0f%%\t%.0f\t\n", pa[i].X, pa[i].Y, 100*sa[i], pl[i].Y, 100*sl[i], u*pl[i].Y)
			}
			tw.Flush()
			fmt.Fprintf(w, "fit: f_a(x) = %.0f·x/(1+%.3f·(x−1)), f_l(x) = %.0f·x/(1+%.3f·(x−1)), U = %v\n", fa.F1, fa.S, fl.F1, fl.S, u)
			tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintf(w, "medians of %d rounds (± half their range); run: %d env steps, the first %d before any update (learning_starts); ties within %.0f%%\n",
				rounds, run.Steps, min(run.WarmUp, run.Steps), 100*run.Tie)
			fmt.Fprintf(tw, "actors\tlearners\tf_a\tU·f_l\tsteady env steps/s\trun s\trun env steps/s\tfrom\t\n")
			for _, a := range allocs {
				from := "measured"
				if a.Predicted {
					from = "fit (prediction)"
				}
				fmt.Fprintf(tw, "%d\t%d\t%.0f\t%.0f\t%.0f\t%.3f\t%.0f\t%s\t\n", a.Actors, a.Learners, a.ActorRate, a.LearnerRate, a.Rate, a.Seconds, a.RunRate, from)
			}
			tw.Flush()
			choice := allocs[0]
			kind := "measured"
			if choice.Predicted {
				kind = "predicted by the fits"
			}
			fmt.Fprintf(w, "choice: %s, %s (%s: %.0f env steps/s steady, the run %.3f s at %.0f env steps/s)\n",
				count(choice.Actors, "actor"), count(choice.Learners, "learner"), kind, choice.Rate, choice.Seconds, choice.RunRate)
			use := choice
			png := filepath.Join(out, "fig12.png")
			if err := tune.Plot(png, pa, pl, fa, fl, u, cores, choice); err != nil {
				return fmt.Errorf("tune: %w", err)
			}
			tuned, err := withRuntime(data, use.Actors, use.Learners)
			if err != nil {
				return fmt.Errorf("tune: %s: %w", config, err)
			}
			cfgPath := filepath.Join(out, strings.TrimSuffix(filepath.Base(config), filepath.Ext(config))+"-tuned.yaml")
			if err := os.WriteFile(cfgPath, tuned, 0o644); err != nil {
				return fmt.Errorf("tune: %w", err)
			}
			fmt.Fprintf(w, "wrote %s and %s\n", png, cfgPath)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&config, "config", "", "run config of an off-policy algorithm (required)")
	f.IntVar(&cores, "cores", runtime.NumCPU(), "cores to allocate: actors + learners ≤ cores")
	f.DurationVar(&budget, "budget", 60*time.Second, "total measuring time")
	f.StringVar(&out, "out", ".", "directory for fig12.png and the tuned config")
	f.IntVar(&rounds, "rounds", 3, "measure every count this many times, alternating counts, and take the median")
	f.Int64Var(&steps, "steps", 0, "env steps of the run to plan for (default: the config's; the written config keeps its own)")
	return cmd
}

// withRuntime returns the config file data with its runtime: section set
// to the pal executor with the given counts (its other keys kept).
func withRuntime(data []byte, actors, learners int) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("not a YAML mapping")
	}
	m := doc.Content[0]
	str := func(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Value: s} }
	var rt *yaml.Node
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == "runtime" {
			if m.Content[i+1].Kind != yaml.MappingNode {
				m.Content[i+1] = &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
			}
			rt = m.Content[i+1]
		}
	}
	if rt == nil {
		rt = &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
		m.Content = append(m.Content, str("runtime"), rt)
	}
	// Set the three keys, keeping the section's others (learner_mode,
	// refresh_every, …); other executors' keys would make it invalid.
	set := func(k, v string) {
		for i := 0; i+1 < len(rt.Content); i += 2 {
			if rt.Content[i].Value == k {
				rt.Content[i+1] = str(v)
				return
			}
		}
		rt.Content = append(rt.Content, str(k), str(v))
	}
	set("executor", "pal")
	set("actors", strconv.Itoa(actors))
	set("learners", strconv.Itoa(learners))
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, err
	}
	return b.Bytes(), enc.Close()
}
