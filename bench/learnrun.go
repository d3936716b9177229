package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strings"

	"herd/algo"
	"herd/algo/all"
	"herd/env"
	"herd/run"
)

// LearnRow is one training run of `herd bench learn`.
type LearnRow struct {
	Config             string  `json:"config"`
	Algo               string  `json:"algo"`
	Env                string  `json:"env"`
	Seed               uint64  `json:"seed"`
	Steps              int64   `json:"steps"`
	FinalReturnMean100 float64 `json:"final_return_mean_100"`
	WallSeconds        float64 `json:"wall_seconds"`
	SPS                float64 `json:"sps"`
	// Deterministic evaluation after training (LearnOptions.EvalEpisodes;
	// 0 episodes = not run).
	EvalEpisodes   int     `json:"eval_episodes"`
	EvalReturnMean float64 `json:"eval_return_mean"`
}

// LearnOptions configures BenchLearn.
type LearnOptions struct {
	// Steps overrides every config's step budget when > 0.
	Steps int64
	// Out is the parent directory of the run directories
	// (<Out>/<algo>-<env>-<seed>); "" trains without writing files.
	Out string
	// Force replaces runs already in their directories (algo.DirForce);
	// without it such a run is an error.
	Force bool
	// Set are --set overrides applied to every config.
	Set []string
	// Progress receives one line per finished run (nil: none).
	Progress io.Writer
	// EvalEpisodes > 0 adds a deterministic evaluation of each trained
	// policy (algo.RunOptions.EvalEpisodes).
	EvalEpisodes int
}

// BenchLearn trains every config file with every seed, one run after
// another (so each run has the machine to itself), and returns one row per
// run in order. It stops at the first error, returning the rows so far; a
// cancelled ctx stops it between runs and within a run.
func BenchLearn(ctx context.Context, configs []string, seeds []uint64, opt LearnOptions) ([]LearnRow, error) {
	if len(configs) == 0 || len(seeds) == 0 {
		return nil, fmt.Errorf("%w: bench learn needs at least one config and one seed", algo.ErrConfig)
	}
	var rows []LearnRow
	for _, cfgPath := range configs {
		data, err := algo.ReadConfig(cfgPath)
		if err != nil {
			return rows, fmt.Errorf("bench learn: %w", err)
		}
		for _, seed := range seeds {
			ov := algo.Overrides{Seed: &seed, Set: opt.Set}
			if opt.Steps > 0 {
				ov.Steps = &opt.Steps
			}
			res, err := algo.Resolve(data, all.Specs(), ov)
			if err != nil {
				return rows, fmt.Errorf("bench learn: %s: %w", cfgPath, err)
			}
			ro := algo.RunOptions{NoFiles: opt.Out == "", EvalEpisodes: opt.EvalEpisodes, Executors: run.Executors()}
			if opt.Force {
				ro.Dir = algo.DirForce
			}
			if opt.Out != "" {
				res.Header.Out = filepath.Join(opt.Out, fmt.Sprintf("%s-%s-%d", res.Header.Algo, res.Header.Env, seed))
			}
			sum, err := algo.TrainRun(ctx, res, ro)
			if err != nil {
				return rows, fmt.Errorf("bench learn: %s seed %d: %w", cfgPath, seed, err)
			}
			row := LearnRow{Config: cfgPath, Algo: res.Header.Algo, Env: res.Header.Env, Seed: seed,
				Steps: sum.Steps, FinalReturnMean100: sum.FinalReturnMean100,
				WallSeconds: sum.WallSeconds, SPS: sum.SPS,
				EvalEpisodes: sum.EvalEpisodes, EvalReturnMean: sum.EvalReturnMean}
			rows = append(rows, row)
			if opt.Progress != nil {
				fmt.Fprintf(opt.Progress, "%s seed %d: return %.2f, %.2f s, %.0f steps/s",
					cfgPath, seed, row.FinalReturnMean100, row.WallSeconds, row.SPS)
				if row.EvalEpisodes > 0 {
					fmt.Fprintf(opt.Progress, ", greedy eval %.2f", row.EvalReturnMean)
				}
				fmt.Fprintln(opt.Progress)
			}
		}
	}
	return rows, nil
}

// WriteLearnMarkdown writes one markdown table per config: a row per seed
// (final return = mean of the last 100 episodes, wall seconds, steps/s), a
// mean row, and how many seeds reach the target — the env's reward
// threshold (CartPole-v1 475, Acrobot-v1 −100, …) unless target is not NaN.
func WriteLearnMarkdown(w io.Writer, rows []LearnRow, target float64) error {
	var errs []error
	p := func(format string, args ...any) {
		_, err := fmt.Fprintf(w, format, args...)
		errs = append(errs, err)
	}
	for start := 0; start < len(rows); {
		end := start
		for end < len(rows) && rows[end].Config == rows[start].Config {
			end++
		}
		group := rows[start:end]
		first := group[0]
		thr, hasThr := target, !math.IsNaN(target)
		if !hasThr {
			if s, err := env.SpecOf(first.Env); err == nil && s.HasRewardThreshold {
				thr, hasThr = s.RewardThreshold, true
			}
		}
		withEval := first.EvalEpisodes > 0
		p("### %s on %s (`%s`, %d steps)\n\n", strings.ToUpper(first.Algo), first.Env, first.Config, first.Steps)
		if withEval {
			p("| seed | final return (mean of last 100 episodes) | greedy eval (%d episodes) | wall s | steps/s |\n|---:|---:|---:|---:|---:|\n", first.EvalEpisodes)
		} else {
			p("| seed | final return (mean of last 100 episodes) | wall s | steps/s |\n|---:|---:|---:|---:|\n")
		}
		var rets, evals, walls, spss []float64
		solved, solvedEval := 0, 0
		for _, r := range group {
			if withEval {
				p("| %d | %.1f | %.1f | %.2f | %.0f |\n", r.Seed, r.FinalReturnMean100, r.EvalReturnMean, r.WallSeconds, r.SPS)
			} else {
				p("| %d | %.1f | %.2f | %.0f |\n", r.Seed, r.FinalReturnMean100, r.WallSeconds, r.SPS)
			}
			rets, evals = append(rets, r.FinalReturnMean100), append(evals, r.EvalReturnMean)
			walls, spss = append(walls, r.WallSeconds), append(spss, r.SPS)
			if hasThr && r.FinalReturnMean100 >= thr {
				solved++
			}
			if hasThr && r.EvalReturnMean >= thr {
				solvedEval++
			}
		}
		mr, sr := algo.MeanStd(rets)
		me, se := algo.MeanStd(evals)
		mw, _ := algo.MeanStd(walls)
		ms, _ := algo.MeanStd(spss)
		if withEval {
			p("| **mean** | **%.1f ± %.1f** | **%.1f ± %.1f** | %.2f | %.0f |\n\n", mr, sr, me, se, mw, ms)
		} else {
			p("| **mean** | **%.1f ± %.1f** | %.2f | %.0f |\n\n", mr, sr, mw, ms)
		}
		if hasThr {
			p("Target ≥ %g: reached by %d of %d seeds (training episodes)", thr, solved, len(group))
			if withEval {
				p(", %d of %d (greedy evaluation)", solvedEval, len(group))
			}
			p(".\n\n")
		}
		start = end
	}
	return errors.Join(errs...)
}
