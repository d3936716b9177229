package algo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"herd/metrics"
)

// Files written into a run directory.
const (
	ConfigFile = "config.yaml"
	ModelFile  = "model.safetensors"
)

// Executor runs an algorithm's pieces under an executor other than the
// local loop (run/hts, …), with Spec.Train's contract.
type Executor func(ctx context.Context, rt *Runtime, spec Spec, cfg Config) (Model, error)

// RunOptions are the per-invocation choices of TrainRun that are not part
// of the run's configuration.
type RunOptions struct {
	// Executors maps runtime.executor names to their implementations;
	// "local" (Spec.Train) needs no entry.
	Executors map[string]Executor
	// Progress receives progress output (nil: none); Bar draws a progress
	// bar instead of plain lines.
	Progress io.Writer
	Bar      bool
	// NoFiles trains without writing the run directory (tests, benchmarks
	// that only want the summary).
	NoFiles bool
	// EvalEpisodes > 0 evaluates the trained policy deterministically for
	// that many episodes after training (Evaluate, seeded from the run
	// seed) and records the result in summary.json. Skipped when
	// interrupted.
	EvalEpisodes int
}

// TrainRun is what `herd train` does with a resolved configuration: it
// creates the run directory, writes config.yaml, trains with a
// metrics.Recorder as the Logger, saves model.safetensors (also when ctx is
// cancelled: the checkpoint of an interrupted run), and closes the recorder,
// which writes metrics.csv, summary.json and curve.png.
//
// A cancelled run returns its summary (Interrupted set) and an error
// wrapping ctx.Err(), after saving everything.
func TrainRun(ctx context.Context, res *Resolved, opt RunOptions) (metrics.Summary, error) {
	h := res.Header
	dir := h.Out
	if opt.NoFiles {
		dir = ""
	}
	if dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return metrics.Summary{}, fmt.Errorf("algo: %w", err)
		}
		b, err := res.Marshal()
		if err != nil {
			return metrics.Summary{}, fmt.Errorf("algo: config: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dir, ConfigFile), b, 0o644); err != nil {
			return metrics.Summary{}, fmt.Errorf("algo: %w", err)
		}
	}
	rec, err := metrics.NewRecorder(metrics.Options{
		Dir: dir, Algo: h.Algo, Env: h.Env, Seed: h.Seed,
		TotalSteps: h.Steps, LogEvery: h.LogEvery, Scalars: res.Spec.Scalars,
		Progress: opt.Progress, Bar: opt.Bar,
	})
	if err != nil {
		return metrics.Summary{}, err
	}
	train := func(ctx context.Context, rt *Runtime, spec Spec, cfg Config) (Model, error) { return spec.Train(ctx, rt, cfg) }
	if ex := h.Runtime.Executor; ex != "" && ex != "local" {
		if train = opt.Executors[ex]; train == nil {
			rec.Close(false)
			return metrics.Summary{}, fmt.Errorf("%w: executor %q is not available here", ErrConfig, ex)
		}
	}
	model, trainErr := train(ctx, &Runtime{Header: h, Log: rec}, res.Spec, res.Config)
	interrupted := trainErr != nil && ctx.Err() != nil && errors.Is(trainErr, ctx.Err())
	var evalErr error
	if opt.EvalEpisodes > 0 && trainErr == nil && model != nil {
		var rets []float64
		rets, evalErr = Evaluate(ctx, model, h.Env, opt.EvalEpisodes, h.Seed)
		rec.SetEval(rets)
	}
	var saveErr error
	if model != nil && dir != "" {
		saveErr = model.Save(filepath.Join(dir, ModelFile))
	}
	sum, closeErr := rec.Close(interrupted)
	if trainErr != nil {
		return sum, errors.Join(fmt.Errorf("algo: %s: %w", h.Algo, trainErr), saveErr, closeErr)
	}
	if err := errors.Join(saveErr, evalErr, closeErr); err != nil {
		return sum, fmt.Errorf("algo: %w", err)
	}
	return sum, nil
}
