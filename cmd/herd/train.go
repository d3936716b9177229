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
}

func newTrainCmd() *cobra.Command {
	var f trainFlags
	cmd := &cobra.Command{
		Use:   "train",
		Short: "train an agent and write config.yaml, metrics.csv, summary.json, curve.png, model.safetensors",
		Long: `train trains one agent. The configuration comes from --config (strict YAML: the
header keys algo, env, seed, steps, out, log_every and a section named after the
algorithm) and the flags, which override the file. Algorithms: ` + algoNames() + `.

Ctrl-C stops training, saves the checkpoint and the metrics, and exits.`,
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
			return runTrain(cmd.Context(), cmd.OutOrStdout(), res, f.quiet, f.evalEpisodes)
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
	fl.StringArrayVar(&f.set, "set", nil, "override an algorithm setting, key=value (repeatable)")
	fl.BoolVar(&f.quiet, "quiet", false, "no progress output")
	fl.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile (pprof) to this file")
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

func runTrain(ctx context.Context, w io.Writer, res *algo.Resolved, quiet bool, evalEpisodes int) error {
	opt := algo.RunOptions{EvalEpisodes: evalEpisodes, Executors: run.Executors()}
	if !quiet {
		opt.Progress, opt.Bar = w, isTerminal(w)
	}
	fmt.Fprintf(w, "training %s on %s, seed %d, %d steps → %s\n",
		res.Header.Algo, res.Header.Env, res.Header.Seed, res.Header.Steps, res.Header.Out)
	sum, err := algo.TrainRun(ctx, res, opt)
	if sum.Interrupted {
		fmt.Fprintf(w, "interrupted at step %d: checkpoint and metrics saved in %s\n", sum.Steps, res.Header.Out)
		return nil
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "done: %d steps in %.1f s (%.0f steps/s), %d episodes, return (last 100) %.2f ± %.2f\n",
		sum.Steps, sum.WallSeconds, sum.SPS, sum.Episodes, sum.FinalReturnMean100, sum.FinalReturnStd100)
	if sum.EvalEpisodes > 0 {
		fmt.Fprintf(w, "greedy evaluation: %d episodes, return %.2f ± %.2f\n", sum.EvalEpisodes, sum.EvalReturnMean, sum.EvalReturnStd)
	}
	fmt.Fprintf(w, "wrote %s\n", filepath.Join(res.Header.Out, "{config.yaml,metrics.csv,summary.json,curve.png,model.safetensors}"))
	return nil
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
	)
	cmd := &cobra.Command{
		Use:     "eval",
		Short:   "evaluate a trained agent deterministically and print mean ± std return",
		Example: `  herd eval --run runs/ppo-CartPole-v1-1 --episodes 20`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return errors.New("eval: --run DIR is required")
			}
			data, err := os.ReadFile(filepath.Join(dir, algo.ConfigFile))
			if err != nil {
				return fmt.Errorf("eval: %w", err)
			}
			res, err := algo.Resolve(data, all.Specs(), algo.Overrides{})
			if err != nil {
				return fmt.Errorf("eval: %s: %w", filepath.Join(dir, algo.ConfigFile), err)
			}
			p, err := res.Spec.LoadPolicy(filepath.Join(dir, algo.ModelFile), res.Header, res.Config)
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
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "run", "", "run directory written by herd train")
	cmd.Flags().IntVar(&episodes, "episodes", 10, "number of episodes")
	cmd.Flags().Uint64Var(&seed, "seed", 0, "evaluation seed (episode k is reset with a seed derived from it)")
	return cmd
}
