package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"

	"github.com/spf13/cobra"

	"herd/algo"
	"herd/algo/all"
	"herd/env"
	"herd/metrics"
	"herd/run"
)

// trainFlags are the flags of `herd train`; a flag that is set overrides the
// config file's value.
type trainFlags struct {
	config, algo, env, out string
	seed                   uint64
	steps, logEvery        int64
	set                    []string
	quiet                  bool
	cpuProfile             string
	evalEpisodes           int
	force, resume          bool
	metricsAddr            string
}

func newTrainCmd() *cobra.Command {
	var f trainFlags
	cmd := &cobra.Command{
		Use:   "train",
		Short: "train an agent and write config.yaml, metrics.csv, summary.json, curve.png, model.safetensors",
		Long: `train trains one agent. The configuration comes from --config (strict YAML: the
header keys algo, env, seed, steps, out, log_every and a section named after the
algorithm) and the flags, which override the file. Algorithms: ` + algoNames() + `.

The run directory (--out) must not hold a run already: --force replaces it
(only once the new run has trained and written all its files; a run
that fails leaves the earlier one as it was), --resume would continue it but no
algorithm can resume today (checkpoints hold the weights only), so it fails
with the reason. Nothing is written before the configuration, the env and
the memory estimate have been checked, and the files appear together at the
end; a lock keeps a second process out of the directory.

Ctrl-C stops training, saves the checkpoint and the metrics, and exits with
status 130; a second Ctrl-C exits at once. A loss, gradient or parameter
that becomes NaN or infinite stops the run: the last finite weights are
saved, summary.json says "diverged", and the status is 1.`,
		Example: `  herd train --config configs/ppo-cartpole.yaml
  herd train --config configs/ppo-cartpole.yaml --seed 2 --steps 100000 --set learning_rate=3e-4
  herd train --algo ppo --env Acrobot-v1 --steps 500000`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			res, err := resolveTrain(cmd, &f)
			if err != nil {
				return err
			}
			if f.cpuProfile != "" {
				pf, err := os.Create(f.cpuProfile)
				if err != nil {
					return fmt.Errorf("train: %w", err)
				}
				defer pf.Close()
				if err := pprof.StartCPUProfile(pf); err != nil {
					return fmt.Errorf("train: %w", err)
				}
				defer pprof.StopCPUProfile()
			}
			if f.force && f.resume {
				return errors.New("train: --force and --resume exclude each other")
			}
			mode := algo.DirNew
			switch {
			case f.force:
				mode = algo.DirForce
			case f.resume:
				mode = algo.DirResume
			}
			if f.metricsAddr != "" {
				live := metrics.NewLive()
				srv, err := metrics.Serve(f.metricsAddr, live)
				if err != nil {
					return fmt.Errorf("train: %w", err)
				}
				defer srv.Close()
				fmt.Fprintf(cmd.OutOrStdout(), "metrics for Prometheus at http://%s/metrics\n", srv.Addr())
				return runTrainLive(cmd.Context(), cmd.OutOrStdout(), res, mode, f.quiet, f.evalEpisodes, live)
			}
			return runTrain(cmd.Context(), cmd.OutOrStdout(), res, mode, f.quiet, f.evalEpisodes)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.config, "config", "", "config file (YAML)")
	fl.StringVar(&f.algo, "algo", "", "algorithm: "+algoNames())
	fl.StringVar(&f.env, "env", "", "environment id, e.g. CartPole-v1")
	fl.Uint64Var(&f.seed, "seed", 1, "run seed")
	fl.Int64Var(&f.steps, "steps", 0, "total environment steps")
	fl.StringVar(&f.out, "out", "", "run directory (default runs/<algo>-<env>-<seed>)")
	fl.Int64Var(&f.logEvery, "log-every", 1000, "metrics.csv row interval in steps")
	fl.StringArrayVar(&f.set, "set", nil, "override an algorithm setting, key=value, or a runtime one, runtime.key=value (repeatable)")
	fl.BoolVar(&f.quiet, "quiet", false, "no progress output")
	fl.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile (pprof) to this file")
	fl.BoolVar(&f.force, "force", false, "replace a run already in --out")
	fl.BoolVar(&f.resume, "resume", false, "continue the run in --out from its checkpoint (no algorithm supports it yet: fails with the reason)")
	fl.StringVar(&f.metricsAddr, "metrics-addr", "", "serve live metrics for Prometheus at http://ADDR/metrics (a port alone binds 127.0.0.1, e.g. :9090)")
	fl.IntVar(&f.evalEpisodes, "eval-episodes", 0, "after training, evaluate the greedy policy for this many episodes (into summary.json)")
	return cmd
}

func algoNames() string {
	s := ""
	for i, sp := range all.Specs() {
		if i > 0 {
			s += ", "
		}
		s += sp.Name
	}
	return s
}

// resolveTrain reads the config file and applies the flags that were set.
func resolveTrain(cmd *cobra.Command, f *trainFlags) (*algo.Resolved, error) {
	return resolveWith(cmd, f, all.Specs())
}

// resolveWith resolves the config file and the flags set on cmd over specs.
func resolveWith(cmd *cobra.Command, f *trainFlags, specs []algo.Spec) (*algo.Resolved, error) {
	var data []byte
	if f.config != "" {
		b, err := os.ReadFile(f.config)
		if err != nil {
			return nil, fmt.Errorf("train: %w", err)
		}
		data = b
	}
	var ov algo.Overrides
	fl := cmd.Flags()
	if fl.Changed("algo") {
		ov.Algo = &f.algo
	}
	if fl.Changed("env") {
		ov.Env = &f.env
	}
	if fl.Changed("out") {
		ov.Out = &f.out
	}
	if fl.Changed("seed") {
		ov.Seed = &f.seed
	}
	if fl.Changed("steps") {
		ov.Steps = &f.steps
	}
	if fl.Changed("log-every") {
		ov.LogEvery = &f.logEvery
	}
	ov.Set = f.set
	res, err := algo.Resolve(data, specs, ov)
	if err != nil && f.config != "" {
		return nil, fmt.Errorf("%s: %w", f.config, err)
	}
	return res, err
}

func runTrain(ctx context.Context, w io.Writer, res *algo.Resolved, mode algo.DirMode, quiet bool, evalEpisodes int) error {
	return runTrainLive(ctx, w, res, mode, quiet, evalEpisodes, nil)
}

// runTrainLive is runTrain that also feeds live, when not nil, for a
// Prometheus endpoint.
func runTrainLive(ctx context.Context, w io.Writer, res *algo.Resolved, mode algo.DirMode, quiet bool, evalEpisodes int, live *metrics.Live) error {
	if evalEpisodes < 0 {
		return fmt.Errorf("train: --eval-episodes must be >= 0, got %d", evalEpisodes)
	}
	opt := algo.RunOptions{EvalEpisodes: evalEpisodes, Dir: mode, Executors: run.Executors(), Live: live}
	if !quiet {
		opt.Progress, opt.Bar = w, isTerminal(w)
	}
	opt.Started = func() {
		fmt.Fprintf(w, "training %s on %s, seed %d, %d steps%s → %s\n",
			res.Header.Algo, res.Header.Env, res.Header.Seed, res.Header.Steps, stepsNote(res), res.Header.Out)
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
	fmt.Fprintf(w, "done: %d steps in %.1f s (%.0f steps/s), %d episodes, return (last 100) %.2f ± %.2f\n",
		sum.Steps, sum.WallSeconds, sum.SPS, sum.Episodes, sum.FinalReturnMean100, sum.FinalReturnStd100)
	if sum.EvalEpisodes > 0 {
		fmt.Fprintf(w, "greedy evaluation: %d episodes, return %.2f ± %.2f\n", sum.EvalEpisodes, sum.EvalReturnMean, sum.EvalReturnStd)
	}
	fmt.Fprintln(w, wroteLine(res.Header.Out))
	return nil
}

// wroteLine names the files of a finished run in dir.
func wroteLine(dir string) string {
	return "wrote " + filepath.Join(dir, "{config.yaml,metrics.csv,summary.json,curve.png,model.safetensors,"+metrics.EventsFile+"}")
}

// stepsNote says, when the algorithm trains whole rollouts and the steps
// asked for are not a multiple of one, how many it will take instead.
func stepsNote(res *algo.Resolved) string {
	steps, unit := res.StepsRun()
	if steps == res.Header.Steps {
		return ""
	}
	return fmt.Sprintf(" (rounded down to %d × %d = %d steps: whole rollouts of num_envs × num_steps)", steps/unit, unit, steps)
}

// count writes n and a noun, in the plural unless n is 1.
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// isTerminal reports whether w is a character device (a terminal), where a
// progress bar makes sense; pipes and files get plain lines.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func newEvalCmd() *cobra.Command {
	var (
		dir      string
		episodes int
		seed     uint64
		envID    string
	)
	cmd := &cobra.Command{
		Use:   "eval",
		Short: "evaluate a trained agent deterministically and print mean ± std return",
		Example: `  herd eval --run runs/ppo-CartPole-v1-1 --episodes 20
  herd eval --run runs/ppo-CartPole-v1-1 --env CartPole-v0`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return errors.New("eval: --run DIR is required")
			}
			data, err := os.ReadFile(filepath.Join(dir, algo.ConfigFile))
			if err != nil {
				return fmt.Errorf("eval: %w", err)
			}
			var ov algo.Overrides
			if cmd.Flags().Changed("env") {
				ov.Env = &envID
			}
			res, err := algo.Resolve(data, all.Specs(), ov)
			if err != nil {
				return fmt.Errorf("eval: %s: %w", filepath.Join(dir, algo.ConfigFile), err)
			}
			model := filepath.Join(dir, algo.ModelFile)
			note, err := algo.CheckCheckpoint(model, res.Header, ov.Env != nil)
			if err != nil {
				return fmt.Errorf("eval: %w", err)
			}
			if note != "" {
				fmt.Fprintln(cmd.ErrOrStderr(), "eval:", note)
			}
			if sum, err := metrics.ReadSummary(filepath.Join(dir, algo.SummaryFile)); err == nil && sum.Status == metrics.StatusDiverged {
				fmt.Fprintf(cmd.ErrOrStderr(), "eval: note: this run diverged (%s); the checkpoint holds its last finite weights\n", sum.Reason)
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
			rets, err := algo.Evaluate(cmd.Context(), p, res.Header.Env, episodes, seed)
			if err != nil {
				return fmt.Errorf("eval: %w", err)
			}
			mean, std := algo.MeanStd(rets)
			fmt.Fprintf(cmd.OutOrStdout(), "%s %s: %d episodes, return %.2f ± %.2f\n",
				res.Header.Algo, res.Header.Env, len(rets), mean, std)
			if env.IsParallel(res.Header.Env) {
				ar, err := algo.EvaluateAgents(cmd.Context(), p, res.Header.Env, episodes, seed)
				if err != nil {
					return fmt.Errorf("eval: %w", err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s %s: %d episodes, %s\n", res.Header.Algo, res.Header.Env, len(ar.Team), ar)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "run", "", "run directory written by herd train")
	cmd.Flags().IntVar(&episodes, "episodes", 10, "number of episodes")
	cmd.Flags().Uint64Var(&seed, "seed", 0, "evaluation seed (episode k is reset with a seed derived from it)")
	cmd.Flags().StringVar(&envID, "env", "", "evaluate on this env instead of the run's (its spaces must match the checkpoint's)")
	return cmd
}
