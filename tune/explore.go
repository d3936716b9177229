package tune

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"go.yaml.in/yaml/v4"

	"herd/algo"
	"herd/env"
	"herd/run/pal"
)

// ExploreOptions are `herd tune`'s settings.
type ExploreOptions struct {
	// Config is the run config file of an off-policy algorithm.
	Config string
	// Specs are the algorithms known.
	Specs []algo.Spec
	// Envs makes the run's envs (algo.Header.Envs).
	Envs env.Maker
	// Cores to allocate: actors + learners ≤ Cores, in [2, 1024].
	Cores int
	// Budget is the time for the throughput measurements, split evenly
	// over the 2 × (Cores−1) × Rounds of them; the whole runs of tied
	// allocations (JointRounds) come on top.
	Budget time.Duration
	// Rounds measures every count this many times, the counts
	// alternating, and takes the median; in [1, 100].
	Rounds int
	// Steps are the env steps of the run to plan for; 0 takes the
	// config's (the written config keeps its own).
	Steps int64
	// JointRounds, when > 0, runs every allocation the model ties (Tied)
	// as a whole PAL run of Steps env steps this many times, alternating,
	// and chooses the one with the highest median env steps/s.
	JointRounds int
	// Out is the directory for fig12.png and <config>-tuned.yaml.
	Out string
}

// Explore measures f_a(x) and f_l(x) for x = 1 … Cores−1 with short real
// PAL runs (run/pal), fits and searches them (Fit, Search), prints the
// table and the choice on w, and writes the plot (Plot) and the config
// with the chosen counts (runtime: {executor: pal, actors, learners}) into
// o.Out.
func Explore(ctx context.Context, w io.Writer, o ExploreOptions) error {
	if o.Config == "" {
		return fmt.Errorf("tune: --config is required")
	}
	if o.Cores < 2 || o.Cores > 1024 {
		return fmt.Errorf("tune: --cores must be in [2, 1024], got %d", o.Cores)
	}
	if o.Budget < 100*time.Millisecond || o.Budget > 24*time.Hour {
		return fmt.Errorf("tune: --budget must be in [100ms, 24h], got %v", o.Budget)
	}
	if o.Rounds < 1 || o.Rounds > 100 {
		return fmt.Errorf("tune: --rounds must be in [1, 100], got %d", o.Rounds)
	}
	if o.JointRounds < 0 || o.JointRounds > 100 {
		return fmt.Errorf("tune: --joint-rounds must be in [0, 100], got %d", o.JointRounds)
	}
	if o.Steps < 0 {
		return fmt.Errorf("tune: --steps must be ≥ 1, got %d", o.Steps)
	}
	// Each of the 2 × (cores−1) × rounds measurements needs time for a
	// few updates; shorter ones would only report that none happened.
	const minEach = 50 * time.Millisecond
	if n := time.Duration(2 * (o.Cores - 1) * o.Rounds); o.Budget/n < minEach {
		return fmt.Errorf("tune: --budget %v split over the %d measurements of --cores %d, --rounds %d leaves %v each; "+
			"each needs at least %v: give --budget %v or more, or fewer --cores or --rounds", o.Budget, n, o.Cores, o.Rounds, o.Budget/n, minEach, minEach*n)
	}
	data, err := algo.ReadConfig(o.Config)
	if err != nil {
		return fmt.Errorf("tune: %w", err)
	}
	res, err := algo.Resolve(data, o.Specs, algo.Overrides{Envs: o.Envs})
	if err != nil {
		return fmt.Errorf("tune: %s: %w", o.Config, err)
	}
	if r := algo.Refusal(pal.Executor(), res.Header, res.Spec); r != "" {
		return fmt.Errorf("tune: %w: %s", algo.ErrConfig, r)
	}
	shape, ok := res.Config.(algo.TransitionShape)
	if !ok {
		return fmt.Errorf("tune: %w", algo.Undeclared(res.Spec, algo.CanTransitionLearner, "its config has no transition shape"))
	}
	_, u := shape.TransitionShape()
	run := Run{U: u, Steps: res.Header.Steps}
	if o.Steps > 0 {
		run.Steps = o.Steps
	}
	if wu, ok := res.Config.(algo.WarmUpper); ok {
		run.WarmUp = wu.WarmUp()
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return fmt.Errorf("tune: %w", err)
	}
	// Rounds alternate the counts, so a burst of other work on the
	// machine hits one round of every count rather than every round of
	// one count; each point is the median of its rounds, and the largest
	// spread among them widens the tie band.
	each := o.Budget / time.Duration(2*(o.Cores-1)*o.Rounds)
	ya, yl := make([][]float64, o.Cores-1), make([][]float64, o.Cores-1)
	for range o.Rounds {
		for x := 1; x < o.Cores; x++ {
			fa, err := pal.MeasureActors(ctx, res.Header, res.Spec, res.Config, x, each)
			if err != nil {
				return fmt.Errorf("tune: actors %d: %w", x, err)
			}
			fl, err := pal.MeasureLearners(ctx, res.Header, res.Spec, res.Config, x, each)
			if err != nil {
				return fmt.Errorf("tune: learners %d: %w", x, err)
			}
			ya[x-1], yl[x-1] = append(ya[x-1], fa), append(yl[x-1], fl)
		}
	}
	var pa, pl []Point
	var sa, sl []float64
	spread := 0.0
	for i := range ya {
		ma, da, err := Summary(ya[i])
		if err != nil {
			return fmt.Errorf("tune: actors %d: %w", i+1, err)
		}
		ml, dl, err := Summary(yl[i])
		if err != nil {
			return fmt.Errorf("tune: learners %d: %w", i+1, err)
		}
		pa, pl = append(pa, Point{X: i + 1, Y: ma}), append(pl, Point{X: i + 1, Y: ml})
		sa, sl = append(sa, da), append(sl, dl)
		spread = max(spread, da, dl)
	}
	run.Tie = Band(spread)
	fa, err := Fit(pa)
	if err != nil {
		return fmt.Errorf("tune: actors: %w", err)
	}
	fl, err := Fit(pl)
	if err != nil {
		return fmt.Errorf("tune: learners: %w", err)
	}
	allocs, err := Search(pa, pl, fa, fl, run, o.Cores)
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
		o.Rounds, run.Steps, min(run.WarmUp, run.Steps), 100*run.Tie)
	fmt.Fprintf(tw, "actors\tlearners\tf_a\tU·f_l\tsteady env steps/s\trun s\trun env steps/s\tfrom\t\n")
	for _, a := range allocs {
		from := "measured"
		if a.Predicted {
			from = "fit (prediction)"
		}
		fmt.Fprintf(tw, "%d\t%d\t%.0f\t%.0f\t%.0f\t%.3f\t%.0f\t%s\t\n", a.Actors, a.Learners, a.ActorRate, a.LearnerRate, a.Rate, a.Seconds, a.RunRate, from)
	}
	tw.Flush()
	choice, kind := Pick(allocs, run)
	if tied := Tied(allocs, run); len(tied) > 1 && !allocs[0].Predicted && o.JointRounds > 0 {
		// Whole runs decide among every allocation the model ties.
		best, err := measureTied(ctx, w, res, tied, run.Steps, o.JointRounds)
		if err != nil {
			return err
		}
		choice, kind = best, "measured, the fastest of the tied allocations in whole runs"
	}
	fmt.Fprintf(w, "choice: %s, %s (%s: %.0f env steps/s steady, the run %.3f s at %.0f env steps/s)\n",
		plural(choice.Actors, "actor"), plural(choice.Learners, "learner"), kind, choice.Rate, choice.Seconds, choice.RunRate)
	use := choice
	png := filepath.Join(o.Out, "fig12.png")
	if err := Plot(png, pa, pl, fa, fl, u, o.Cores, choice); err != nil {
		return fmt.Errorf("tune: %w", err)
	}
	tuned, err := withRuntime(data, use.Actors, use.Learners)
	if err != nil {
		return fmt.Errorf("tune: %s: %w", o.Config, err)
	}
	cfgPath := filepath.Join(o.Out, strings.TrimSuffix(filepath.Base(o.Config), filepath.Ext(o.Config))+"-tuned.yaml")
	if err := os.WriteFile(cfgPath, tuned, 0o644); err != nil {
		return fmt.Errorf("tune: %w", err)
	}
	fmt.Fprintf(w, "wrote %s and %s\n", png, cfgPath)
	return nil
}

// MaxTie is the widest tie band: an allocation is never chosen for
// `herd tune`'s written config below 1 − MaxTie of the best predicted run
// rate, however noisy the measurements.
const MaxTie = 0.05

// Band is the tie band for measurements whose largest relative spread
// (Summary's, run to run) is spread: the spread itself, at least 1% and
// at most MaxTie.
func Band(spread float64) float64 { return min(max(spread, 0.01), MaxTie) }

// Pick is the allocation `herd tune` writes without whole-run rounds, and
// how it came about: the ranked list's first (Search, which among the
// allocations tied within the band takes the fewest workers), or, when the
// model ties it with measured allocations of as many workers (Tied, the
// band capped at MaxTie), the one of those with the most actors
// (MostActors). So the written choice is Search's worker count, and never
// below 1 − MaxTie of the best predicted run rate.
func Pick(allocs []Allocation, run Run) (Allocation, string) {
	choice, kind := allocs[0], "measured"
	if choice.Predicted {
		return choice, "predicted by the fits"
	}
	run.Tie = min(run.tie(), MaxTie)
	var best float64
	for _, a := range allocs {
		best = max(best, a.RunRate)
	}
	// Tied's band is the best measured rate's; a prediction may be better.
	n := choice.Actors + choice.Learners
	tied := slices.DeleteFunc(Tied(allocs, run), func(a Allocation) bool {
		return a.RunRate < (1-MaxTie)*best || a.Actors+a.Learners != n
	})
	if len(tied) > 1 {
		choice, kind = MostActors(tied), fmt.Sprintf("measured, of the %d allocations the model ties the one with the most actors", len(tied))
	}
	return choice, kind
}

// MostActors returns the tied allocation (Tied) with the most actors, and
// among those the fewest learners. The model is a steady state; in a run
// the learners wait at every hand-off at the rate limiter until an actor
// has the next U env steps ready, and surplus actors, which cost nothing
// the model can see when the learners bound the run, keep them fed (on DQN
// CartPole the one-actor allocation was the slowest one-learner allocation
// in 5 of 6 scripts/pal-sweep.sh runs of docs/BENCHMARKS.md "PAL"). A learner
// more only helps a run the learners bound, which a tie with fewer
// learners is not.
func MostActors(tied []Allocation) Allocation {
	return slices.MinFunc(tied, func(x, y Allocation) int {
		if c := y.Actors - x.Actors; c != 0 {
			return c
		}
		return x.Learners - y.Learners
	})
}

// measureTied runs each tied allocation as a whole PAL run of steps env
// steps, rounds times with the allocations alternating (so a burst of
// other work hits one round of each), prints the medians and returns the
// allocation with the highest. The model ties allocations it cannot tell
// apart; what it leaves out (hand-offs at the rate limiter, actors and
// learners sharing cores) decides between them, so they are measured.
func measureTied(ctx context.Context, w io.Writer, res *algo.Resolved, tied []Allocation, steps int64, rounds int) (Allocation, error) {
	h := res.Header
	h.Steps = steps
	// These runs are outside --budget: say up front how long they take.
	var est float64
	for _, a := range tied {
		est += a.Seconds
	}
	fmt.Fprintf(w, "running the %d tied allocations as whole runs of %d env steps, %d rounds (about %.0f s)\n", len(tied), steps, rounds, est*float64(rounds))
	ys := make([][]float64, len(tied))
	for range rounds {
		for i, a := range tied {
			y, err := pal.MeasureJoint(ctx, h, res.Spec, res.Config, a.Actors, a.Learners)
			if err != nil {
				return Allocation{}, fmt.Errorf("tune: joint run (%d, %d): %w", a.Actors, a.Learners, err)
			}
			ys[i] = append(ys[i], y)
		}
	}
	fmt.Fprintf(w, "whole runs of the %d tied allocations, %d env steps, medians of %d rounds:\n", len(tied), steps, rounds)
	best, bestY := 0, 0.0
	for i, a := range tied {
		m, d, err := Summary(ys[i])
		if err != nil {
			return Allocation{}, fmt.Errorf("tune: joint run (%d, %d): %w", a.Actors, a.Learners, err)
		}
		fmt.Fprintf(w, "  (%d, %d) %.0f env steps/s ± %.0f%%\n", a.Actors, a.Learners, m, 100*d)
		if m > bestY {
			best, bestY = i, m
		}
	}
	return tied[best], nil
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

// plural writes n and a noun, in the plural unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
