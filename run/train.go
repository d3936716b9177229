package run

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"

	"herd/algo"
	"herd/env"
	"herd/metrics"
)

// TrainOptions are `herd train`'s settings besides the config.
type TrainOptions struct {
	// Mode is the run directory's mode (DirMode).
	Mode algo.DirMode
	// Quiet: no progress output.
	Quiet bool
	// EvalEpisodes, when > 0, evaluates the greedy policy after training
	// (into summary.json).
	EvalEpisodes int
	// MetricsAddr, when set, serves live metrics for Prometheus.
	MetricsAddr string
	// CPUProfile, when set, is a file for a pprof CPU profile of the run.
	CPUProfile string
}

// Train trains res with every executor (Executors) through
// algo.TrainRun, printing progress and the outcome on w. An interrupted
// run returns an error wrapping context.Canceled once everything was
// saved.
func Train(ctx context.Context, w io.Writer, res *algo.Resolved, o TrainOptions) (err error) {
	if o.EvalEpisodes < 0 {
		return fmt.Errorf("train: --eval-episodes must be >= 0, got %d", o.EvalEpisodes)
	}
	stopProfile, err := StartCPUProfile(o.CPUProfile)
	if err != nil {
		return fmt.Errorf("train: %w", err)
	}
	defer func() {
		if perr := stopProfile(); perr != nil {
			// %v: an interrupted run whose profile was lost is a failure.
			err = fmt.Errorf("train: %v", errors.Join(err, perr))
		}
	}()
	opt := algo.RunOptions{EvalEpisodes: o.EvalEpisodes, Dir: o.Mode, Executors: Executors()}
	if o.MetricsAddr != "" {
		live, srv, err := ServeLive(w, o.MetricsAddr)
		if err != nil {
			return fmt.Errorf("train: %w", err)
		}
		defer srv.Close()
		opt.Live = live
	}
	if !o.Quiet {
		opt.Progress, opt.Bar = w, IsTerminal(w)
	}
	opt.Resumed = ResumedNote(w)
	opt.Started = func() {
		fmt.Fprintf(w, "training %s on %s, seed %d, %d steps%s → %s\n",
			res.Header.Algo, res.Header.Env, res.Header.Seed, res.Header.Steps, StepsNote(res), res.Header.Out)
	}
	sum, err := algo.TrainRun(ctx, res, opt)
	if errors.Is(err, context.Canceled) {
		// TrainRun wraps Canceled only when everything was saved.
		fmt.Fprintf(w, "interrupted at step %d: checkpoint and metrics saved in %s\n", sum.Steps, res.Header.Out)
		return err
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(w, DoneLine(sum))
	switch {
	case sum.EvalEpisodes > 0 && len(sum.EvalTeams) > 0:
		fmt.Fprintf(w, "greedy evaluation: %d episodes", sum.EvalEpisodes)
		for _, n := range slices.Sorted(maps.Keys(sum.EvalTeams)) {
			t := sum.EvalTeams[n]
			fmt.Fprintf(w, ", %s return %.2f ± %.2f", n, t.ReturnMean, t.ReturnStd)
		}
		fmt.Fprintln(w)
	case sum.EvalEpisodes > 0:
		fmt.Fprintf(w, "greedy evaluation: %d episodes, return %.2f ± %.2f\n", sum.EvalEpisodes, sum.EvalReturnMean, sum.EvalReturnStd)
	}
	fmt.Fprintln(w, WroteLine(res.Header.Out))
	return nil
}

// EvalOptions are `herd eval`'s settings.
type EvalOptions struct {
	// Dir is the run directory written by herd train.
	Dir string
	// Env, when not nil, evaluates on this env instead of the run's (its
	// spaces must match the checkpoint's).
	Env *string
	// Episodes to play; episode k is reset with a seed derived from Seed.
	Episodes int
	Seed     uint64
	// Specs are the algorithms known.
	Specs []algo.Spec
	// Envs makes the run's envs (algo.Header.Envs).
	Envs env.Maker
}

// Eval evaluates the run in o.Dir deterministically and prints the mean
// and standard deviation of the return on w (per agent too, for a
// multi-agent env); notes go to notes.
func Eval(ctx context.Context, w, notes io.Writer, o EvalOptions) error {
	if o.Dir == "" {
		return errors.New("eval: --run DIR is required")
	}
	data, err := algo.ReadConfig(filepath.Join(o.Dir, algo.ConfigFile))
	if err != nil {
		return fmt.Errorf("eval: %w", err)
	}
	res, err := algo.Resolve(data, o.Specs, algo.Overrides{Env: o.Env, Envs: o.Envs})
	if err != nil {
		return fmt.Errorf("eval: %s: %w", filepath.Join(o.Dir, algo.ConfigFile), err)
	}
	model := filepath.Join(o.Dir, algo.ModelFile)
	note, err := algo.CheckCheckpoint(model, res.Header, o.Env != nil)
	if err != nil {
		return fmt.Errorf("eval: %w", err)
	}
	if note != "" {
		fmt.Fprintln(notes, "eval:", note)
	}
	if sum, err := metrics.ReadSummary(filepath.Join(o.Dir, algo.SummaryFile)); err == nil && sum.Status == metrics.StatusDiverged {
		fmt.Fprintf(notes, "eval: note: this run diverged (%s); the checkpoint holds its last finite weights\n", sum.Reason)
	}
	var p algo.Policy
	if res.Header.MultiAgent.Enabled() {
		p, err = algo.LoadPolicies(model, res)
	} else {
		p, err = res.Spec.LoadPolicy(model, res.Header, res.Config)
	}
	if err != nil {
		return fmt.Errorf("eval: %w", err)
	}
	if res.Header.Envs.IsParallel(res.Header.Env) {
		// The same episodes as Evaluate (its return is the team sum),
		// which a competitive env does not report (each team's instead).
		ar, err := algo.EvaluateAgents(ctx, p, res.Header.Envs, res.Header.Env, o.Episodes, o.Seed)
		if err != nil {
			return fmt.Errorf("eval: %w", err)
		}
		if !ar.Competitive() {
			mean, std := algo.MeanStd(ar.Team)
			fmt.Fprintf(w, "%s %s: %d episodes, return %.2f ± %.2f\n", res.Header.Algo, res.Header.Env, len(ar.Team), mean, std)
		}
		fmt.Fprintf(w, "%s %s: %d episodes, %s\n", res.Header.Algo, res.Header.Env, len(ar.Team), ar)
		return nil
	}
	rets, err := algo.Evaluate(ctx, p, res.Header.Envs, res.Header.Env, o.Episodes, o.Seed)
	if err != nil {
		return fmt.Errorf("eval: %w", err)
	}
	mean, std := algo.MeanStd(rets)
	fmt.Fprintf(w, "%s %s: %d episodes, return %.2f ± %.2f\n", res.Header.Algo, res.Header.Env, len(rets), mean, std)
	return nil
}

// ResumedNote returns algo.RunOptions.Resumed writing what a resumed run
// continues from to w.
func ResumedNote(w io.Writer) func(step int64, path string, skipped []string) {
	return func(step int64, path string, skipped []string) {
		for _, s := range skipped {
			fmt.Fprintf(w, "skipped a damaged checkpoint: %s\n", s)
		}
		fmt.Fprintf(w, "resuming from step %d (%s)\n", step, path)
	}
}
