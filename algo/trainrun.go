package algo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"herd/internal/atomicfile"
	"herd/internal/exitguard"
	"herd/internal/trainstate"
	"herd/metrics"
	"herd/nn"
)

// Files written into a run directory (see also RunFiles).
const (
	ConfigFile = "config.yaml"
	ModelFile  = "model.safetensors"
)

// RunOptions are the per-invocation choices of TrainRun that are not part
// of the run's configuration.
type RunOptions struct {
	// Executors are those a run may name in runtime.executor (package
	// run's Executors). Without an entry named LocalExecutor, local runs
	// call Spec.Train.
	Executors []Executor
	// Progress receives progress output (nil: none); Bar draws a progress
	// bar instead of plain lines.
	Progress io.Writer
	Bar      bool
	// NoFiles trains without writing the run directory (tests, benchmarks
	// that only want the summary).
	NoFiles bool
	// Dir says what to do when Header.Out already holds a run: refuse
	// (DirNew, the default), replace it (DirForce) or resume it
	// (DirResume: algorithms with Spec.Resumable under the local
	// executor or one with Executor.Resumable; any other fails with
	// ErrCannotResume).
	Dir DirMode
	// Resumed, when not nil, is told the checkpoint a resumed run
	// continues from, and the newer ones it skipped (damaged), before
	// Started.
	Resumed func(step int64, path string, skipped []string)
	// Checkpointed, when not nil, is told of each checkpoint written.
	Checkpointed func(CheckpointInfo)
	// EvalEpisodes > 0 evaluates the trained policy deterministically for
	// that many episodes after training (Evaluate, seeded from the run
	// seed) and records the result in summary.json. Skipped when the run
	// did not complete.
	EvalEpisodes int
	// Live, when set, receives each metrics row for a Prometheus endpoint
	// (metrics/prom's Live, served by run.ServeLive).
	Live metrics.RowSink
	// Started, when not nil, is called once every check has passed, just
	// before training starts (the CLI announces the run there, so a refused
	// run prints only its error).
	Started func()
}

// TrainRun is what `herd train` does with a resolved configuration.
//
// Before it writes anything it checks what can be checked: the executor
// the header names runs the algorithm with its runtime keys (AdmitRun over
// opt.Executors), the env exists,
// the estimated memory fits (EstimateMemory), and the output directory is
// free (not locked by another process, holding no run unless opt.Dir says
// otherwise). It then trains with a metrics.Recorder behind a divergence
// guard, writing config.yaml, metrics.csv, summary.json, curve.png and
// model.safetensors into a staging directory, and moves them into Header.Out
// together at the end. A run whose Train fails before returning a model
// leaves the directory as it was.
//
// A run of an algorithm with Spec.Resumable under the local executor (or
// one with Executor.Resumable) also
// writes its training state into Header.Out/checkpoints (Checkpoints,
// Runtime.Checkpoints). With DirResume it continues from the newest one
// that loads, after checking it against the run (LoadCheckpoint) before
// anything in the directory changes; any other run refuses DirResume with
// ErrCannotResume naming the algorithm and the executor.
//
// The returned error is:
//   - nil: the run completed and every file was written;
//   - one wrapping context.Canceled: ctx was cancelled (Ctrl-C) and the
//     checkpoint of the interrupted run and its metrics were all written;
//   - one wrapping ErrDiverged (a *DivergedError): a loss, gradient or
//     parameter became non-finite; the run was stopped there, the last
//     finite parameters were saved and summary.json says "diverged";
//   - any other error: something could not be done or saved. It never
//     wraps context.Canceled, so a cancelled run whose save failed is not
//     mistaken for a clean interruption.
func TrainRun(ctx context.Context, res *Resolved, opt RunOptions) (metrics.Summary, error) {
	h := res.Header
	ex, err := AdmitRun(withLocal(opt.Executors), res)
	if err != nil {
		return metrics.Summary{}, err
	}
	resumable := resumableUnder(res, ex) && !opt.NoFiles
	if opt.Dir == DirResume && !resumable {
		return metrics.Summary{}, cannotResume(res, ex, opt.NoFiles)
	}
	var key []byte // the configuration a checkpoint must match
	if resumable {
		if key, err = ResumeConfig(res); err != nil {
			return metrics.Summary{}, fmt.Errorf("algo: config: %w", err)
		}
	}
	e, envBytes, err := envFootprint(h.Envs, h.Env)
	if err != nil {
		return metrics.Summary{}, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	obs, act := e.ObservationSpace(), e.ActionSpace()
	e.Close()
	if err := checkMemory(EstimateMemory(h, res.Config, obs, act, envBytes, WorkersOf(ex, h))); err != nil {
		return metrics.Summary{}, err
	}
	var rd *runDir
	dir := ""
	var restored *trainstate.State
	var restoredPath string
	var skipped []string
	resume := func() error {
		var err error
		restored, restoredPath, skipped, err = LoadCheckpoint(filepath.Join(h.Out, CheckpointDir), h.Algo, h.Env, key)
		if err != nil {
			return err
		}
		if _, ok := restored.Sections[SectionMetrics]; !ok {
			return fmt.Errorf("%w: %s holds no metrics section", ErrCannotResume, restoredPath)
		}
		if steps, _ := res.StepsRun(); restored.Header.Step > steps {
			return fmt.Errorf("%w: %s was taken at step %d, past this run's %d steps; give --steps %d or more",
				ErrCannotResume, restoredPath, restored.Header.Step, steps, restored.Header.Step)
		}
		return nil
	}
	if !resumable {
		resume = nil
	}
	if !opt.NoFiles {
		if res.OutIsDefault() && opt.Dir == DirNew {
			// A default directory never collides: it moves on to a free
			// numbered one, which the caller then reads in res.Header.Out.
			rd, err = openFreeRunDir(h.Out)
			if err == nil {
				h.Out, res.Header.Out = rd.dir, rd.dir
			}
		} else {
			rd, err = openRunDir(h.Out, opt.Dir, resume)
		}
		if err != nil {
			return metrics.Summary{}, err
		}
		defer rd.close()
		dir = rd.stage
		b, err := res.Marshal()
		if err == nil {
			err = atomicfile.WriteFile(filepath.Join(dir, ConfigFile), b, 0o644)
		}
		if err != nil {
			rd.abort()
			return metrics.Summary{}, fmt.Errorf("algo: config: %w", err)
		}
	}
	var extra []string
	if ex.Scalars != nil {
		extra = ex.Scalars(h)
	}
	scalars := append(slices.Clone(res.Spec.Scalars), extra...)
	if h.MultiAgent.Enabled() {
		scalars = PolicyScalars(h, res.Spec, res.Others, extra)
	}
	if ex.Name == LocalExecutor {
		// The local loop's envs log each team's return (Runtime.MakeEnvs;
		// multipolicy's split), one column set for the run, not per policy.
		scalars = append(slices.Clone(scalars), TeamScalars(h.Envs, h.Env)...)
	}
	mo := metrics.Options{
		Dir: dir, Algo: h.Algo, Env: h.Env, Seed: h.Seed,
		TotalSteps: h.Steps, LogEvery: h.LogEvery, Scalars: scalars,
		Progress: opt.Progress, Bar: opt.Bar, Live: opt.Live,
		Machine: &metrics.Machine{OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.GOMAXPROCS(0), Kernels: nn.Kernels()},
	}
	if restored != nil {
		mo.Resume = restored.Sections[SectionMetrics]
	}
	rec, err := metrics.NewRecorder(mo)
	if err != nil {
		if rd != nil {
			rd.abort()
		}
		if restored != nil {
			err = fmt.Errorf("%w: %s: %w", ErrCannotResume, restoredPath, err)
		}
		return metrics.Summary{}, err
	}
	var ck *Checkpoints
	if resumable && rd != nil {
		ck = NewCheckpoints(CheckpointOptions{Dir: rd.checkpointDir(), Every: h.CheckpointEvery, Keep: h.CheckpointKeep,
			Algo: h.Algo, Env: h.Env, Config: key})
		if restored != nil {
			if err := ck.Resume(restored); err != nil {
				rec.Close(false)
				rd.abort()
				return metrics.Summary{}, fmt.Errorf("%w: %s: %w", ErrCannotResume, restoredPath, err)
			}
		}
		ck.saved = opt.Checkpointed
		ck.add = func(s *trainstate.State) error {
			b, err := rec.MarshalState()
			s.Sections[SectionMetrics] = b
			return err
		}
	}
	if restored != nil {
		// The damaged checkpoints newer than the one loaded would count
		// among the newest checkpoint_keep and push good ones out.
		if err := setAsideNewer(restoredPath); err != nil {
			rec.Close(false)
			rd.abort()
			return metrics.Summary{}, err
		}
		if opt.Resumed != nil {
			opt.Resumed(restored.Header.Step, restoredPath, skipped)
		}
	}
	if opt.Started != nil {
		opt.Started()
	}
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	g := newGuard(rec, cancel, h.LogEvery)
	model, trainErr := ex.Train(runCtx, &Runtime{Header: h, Log: g, OnTrack: g.track, Others: res.Others, Checkpoints: ck}, res.Spec, res.Config)
	if model == nil {
		// Failed before there was anything to save: leave the directory as
		// it was (an earlier run stays untouched).
		rec.Close(false)
		if rd != nil {
			rd.abort()
		}
		if trainErr == nil {
			trainErr = errors.New("Train returned no model")
		}
		if ctx.Err() != nil && errors.Is(trainErr, context.Canceled) {
			return metrics.Summary{}, fmt.Errorf("algo: %s: interrupted before training started; nothing saved: %v", h.Algo, trainErr)
		}
		return metrics.Summary{}, fmt.Errorf("algo: %w", withAlgo(h.Algo, trainErr))
	}

	diverged := g.err
	interrupted := diverged == nil && trainErr != nil && ctx.Err() != nil && errors.Is(trainErr, context.Canceled)
	var failures []error // everything that was promised and not done
	switch {
	case diverged != nil:
		if !g.restore() {
			failures = append(failures, fmt.Errorf("%s does not expose its parameters (algo.ParamModel): no finite copy to save", h.Algo))
		}
	case g.writeErr != nil:
		failures = append(failures, fmt.Errorf("stopped at step %d because the metrics could not be written: %w", g.step, g.writeErr))
	case trainErr != nil && !interrupted:
		failures = append(failures, withAlgo(h.Algo, trainErr))
	case interrupted && ck != nil && ck.Err() != nil:
		failures = append(failures, ck.Err())
	}
	if opt.EvalEpisodes > 0 && trainErr == nil {
		var rets []float64
		var evalErr error
		if h.Envs.IsParallel(h.Env) {
			// The same episodes as Evaluate (its return is ar.Team), and
			// each team's return for a competitive env.
			var ar AgentReturns
			ar, evalErr = EvaluateAgents(ctx, model, h.Envs, h.Env, opt.EvalEpisodes, h.Seed)
			rets = ar.Team
			if ar.Competitive() {
				cols := make([][]float64, len(ar.TeamNames))
				for i := range cols {
					cols[i] = ar.TeamColumn(i)
				}
				rec.SetEvalTeams(ar.TeamNames, cols)
			}
		} else {
			rets, evalErr = Evaluate(ctx, model, h.Envs, h.Env, opt.EvalEpisodes, h.Seed)
		}
		rec.SetEval(rets)
		if evalErr != nil {
			failures = append(failures, fmt.Errorf("evaluation: %w", evalErr))
		}
	}
	if dir != "" {
		if err := saveCheckpoint(model, filepath.Join(dir, ModelFile), checkpointMeta(h, obs, act)); err != nil {
			failures = append(failures, fmt.Errorf("checkpoint not saved: %w", err))
		}
	}
	switch {
	case ck != nil && ck.Disabled() != "":
		rec.SetCheckpoints("off: " + ck.Disabled())
	case ck != nil && ck.partialNote() != "":
		rec.SetCheckpoints("on: " + ck.partialNote())
	case ck != nil:
		rec.SetCheckpoints("on")
	case dir != "":
		rec.SetCheckpoints("off: " + notResumable(res, ex, false))
	}
	if ck != nil {
		rec.SetEnvsRestarted(ck.Restarts())
	}
	switch {
	case diverged != nil:
		rec.SetStatus(metrics.StatusDiverged, diverged.Error())
	case len(failures) > 0:
		rec.SetStatus(metrics.StatusFailed, errors.Join(failures...).Error())
	}
	sum, closeErr := rec.Close(interrupted)
	if closeErr != nil {
		failures = append(failures, closeErr)
	}
	switch {
	case rd == nil:
	case len(failures) > 0 && rd.hadRun:
		// A run that failed never replaces an earlier one: --force
		// promised the replacement only for a run that is whole.
		failures = append(failures, fmt.Errorf("the earlier run in %s is unchanged; this run's partial files are in %s", h.Out, rd.stage))
	default:
		// A second Ctrl-C waits for the commit: cut in half, it would
		// leave the directory torn until the next run into it.
		release := exitguard.Hold(ctx)
		err := rd.commit()
		release()
		if err != nil {
			failures = append(failures, err)
		}
	}
	switch {
	case diverged != nil && len(failures) > 0:
		return sum, fmt.Errorf("algo: %s: %w; not everything was saved: %v", h.Algo, diverged, errors.Join(failures...))
	case diverged != nil:
		return sum, fmt.Errorf("algo: %s: %w; stopped there and saved the last finite parameters (step %d)", h.Algo, diverged, diverged.KeptStep)
	case interrupted && len(failures) > 0:
		// %v, not %w: a failure is never reported as a clean interruption.
		return sum, fmt.Errorf("algo: %s: interrupted at step %d, but not everything was saved: %v", h.Algo, sum.Steps, errors.Join(failures...))
	case len(failures) > 0:
		return sum, fmt.Errorf("algo: %w", errors.Join(failures...))
	}
	if interrupted {
		return sum, fmt.Errorf("algo: %s: interrupted at step %d, checkpoint and metrics saved: %w", h.Algo, sum.Steps, trainErr)
	}
	return sum, nil
}

// cannotResume says why the run res cannot be resumed under executor ex.
// resumableUnder reports whether run res writes checkpoints to resume
// from under executor ex (given a run directory).
func resumableUnder(res *Resolved, ex Executor) bool {
	h := res.Header
	if h.MultiAgent.Enabled() {
		return ex.Name == LocalExecutor && notResumablePolicy(res) == ""
	}
	return (ex.Name == LocalExecutor || ex.Resumable) && res.Spec.Resumable &&
		(ex.NotResumable == nil || ex.NotResumable(h, res.Spec) == "")
}

// notResumablePolicy names the first algorithm of run res's policies (a
// multiagent section) that saves no training state, "" when every one
// does.
func notResumablePolicy(res *Resolved) string {
	if !res.Spec.Resumable {
		return res.Spec.Name
	}
	for _, id := range res.Header.MultiAgent.Policies {
		if o, ok := res.Others[res.Header.MultiAgent.Algos[id]]; ok && !o.Spec.Resumable {
			return o.Spec.Name
		}
	}
	return ""
}

// WhyNotResumable says why run res, under the executor of exs it names,
// writes no checkpoints to resume from, "" when it does: a supervisor
// that would start a killed learner again to resume asks it first.
func WhyNotResumable(res *Resolved, exs []Executor) (string, error) {
	ex, err := AdmitRun(withLocal(exs), res)
	if err != nil || resumableUnder(res, ex) {
		return "", err
	}
	return notResumable(res, ex, false), nil
}

func cannotResume(res *Resolved, ex Executor, noFiles bool) error {
	return fmt.Errorf("%w %s: %s; use --force to train it again from scratch, or another --out", ErrCannotResume, res.Header.Out, notResumable(res, ex, noFiles))
}

// notResumable says why the run res writes no checkpoints under executor
// ex (summary.json's checkpoints note, and --resume's refusal).
func notResumable(res *Resolved, ex Executor, noFiles bool) string {
	h := res.Header
	switch {
	case noFiles:
		return "a run without a run directory has no checkpoint"
	case h.MultiAgent.Enabled() && ex.Name != LocalExecutor:
		return fmt.Sprintf("%s with a multiagent section under executor %s saves no training state to continue from yet; only the local executor checkpoints every policy at one joint step", h.Algo, ex.Name)
	case h.MultiAgent.Enabled():
		return fmt.Sprintf("%s, which trains a policy of the multiagent section (executor %s), saves no training state to continue from yet, only its final weights", notResumablePolicy(res), ex.Name)
	case !res.Spec.Resumable:
		return fmt.Sprintf("%s (executor %s) saves no training state to continue from yet, only its final weights", h.Algo, ex.Name)
	case ex.Name != LocalExecutor && !ex.Resumable:
		return fmt.Sprintf("%s under executor %s saves no training state to continue from yet; only its local executor does", h.Algo, ex.Name)
	case ex.NotResumable != nil && ex.NotResumable(h, res.Spec) != "":
		return fmt.Sprintf("%s under executor %s: %s", h.Algo, ex.Name, ex.NotResumable(h, res.Spec))
	}
	return fmt.Sprintf("%s (executor %s) saves no training state to continue from yet", h.Algo, ex.Name)
}

// withAlgo prefixes err with the algorithm's name unless the algorithm's
// own error already starts with it (no "sac: sac: …").
func withAlgo(name string, err error) error {
	if strings.HasPrefix(err.Error(), name+": ") {
		return err
	}
	return fmt.Errorf("%s: %w", name, err)
}

// withLocal returns exs with, when none is named LocalExecutor, one that
// calls Spec.Train.
func withLocal(exs []Executor) []Executor {
	if _, ok := FindExecutor(exs, LocalExecutor); ok {
		return exs
	}
	return append(slices.Clone(exs), Executor{Name: LocalExecutor, Doc: "the algorithm's own loop (Spec.Train)",
		Train: func(ctx context.Context, rt *Runtime, spec Spec, cfg Config) (Model, error) {
			if spec.Train == nil {
				return nil, fmt.Errorf("%w: algorithm %s has no loop of its own (a dataflow plan): train it with an executor that runs its plan (run.Executors)", ErrConfig, spec.Name)
			}
			return spec.Train(ctx, rt, cfg)
		}})
}
