package main

import (
	"fmt"
	"strings"

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
that fails leaves the earlier one as it was), --resume continues it from its
newest checkpoint (DIR/checkpoints; ppo and a2c under the local and hts
executors, bit for bit; the other algorithms and executors refuse with the
reason). Without --config it trains with the run's own settings
(DIR/config.yaml); a flag that changes one, other than --steps and
--log-every, is refused naming it.
Nothing is written before the configuration, the env and the memory
estimate have been checked, and the files appear together at the end; a
lock keeps a second process out of the directory.

Ctrl-C (or SIGTERM) stops training, saves the model, the checkpoint and the
metrics, and exits with status 130; a second Ctrl-C exits at once. A loss, gradient or parameter
that becomes NaN or infinite stops the run: the last finite weights are
saved, summary.json says "diverged", and the status is 1.

Executors (runtime.executor; docs/guide/executors.md has the full table):
` + algo.Matrix{Executors: run.Executors(), Specs: all.Specs()}.Text(),
		Example: `  herd train --config configs/ppo-cartpole.yaml
  herd train --config configs/ppo-cartpole.yaml --seed 2 --steps 100000 --set learning_rate=3e-4
  herd train --algo ppo --env Acrobot-v1 --steps 500000
  herd train --config configs/ppo-cartpole.yaml --out runs/p --resume
  herd train --resume --out runs/p --steps 200000`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			mode, err := run.DirMode(f.force, f.resume)
			if err != nil {
				return fmt.Errorf("train: %w", err)
			}
			res, err := resolveWith(cmd, &f, all.Specs())
			if err != nil {
				return err
			}
			return run.Train(cmd.Context(), cmd.OutOrStdout(), res, run.TrainOptions{Mode: mode, Quiet: f.quiet,
				EvalEpisodes: f.evalEpisodes, MetricsAddr: f.metricsAddr, CPUProfile: f.cpuProfile})
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
	fl.BoolVar(&f.resume, "resume", false, "continue the run in --out from its newest checkpoint, with its config.yaml unless --config is given (ppo, a2c, dqn, sac, td3 and ddpg under the local executor, ppo and a2c under hts; a changed setting other than steps and logging is refused)")
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

// resolveWith resolves the config file and the flags set on cmd over specs.
func resolveWith(cmd *cobra.Command, f *trainFlags, specs []algo.Spec) (*algo.Resolved, error) {
	if f.resume && f.config == "" {
		return resolveResume(cmd, f, specs)
	}
	var data []byte
	if f.config != "" {
		b, err := algo.ReadConfig(f.config)
		if err != nil {
			return nil, fmt.Errorf("train: %w", err)
		}
		data = b
	}
	ov := algo.Overrides{Set: f.set, Envs: envMaker()}
	fl := cmd.Flags().Changed
	ifSet(fl, "algo", &ov.Algo, &f.algo)
	ifSet(fl, "env", &ov.Env, &f.env)
	ifSet(fl, "out", &ov.Out, &f.out)
	ifSet(fl, "seed", &ov.Seed, &f.seed)
	ifSet(fl, "steps", &ov.Steps, &f.steps)
	ifSet(fl, "log-every", &ov.LogEvery, &f.logEvery)
	res, err := algo.Resolve(data, specs, ov)
	if err != nil && f.config != "" {
		return nil, fmt.Errorf("%s: %w", f.config, err)
	}
	return res, err
}

// resolveResume resolves `--resume --out DIR` without --config: the
// settings are the run's own (DIR/config.yaml), and a flag that would
// change one of them, other than --steps and --log-every, is refused
// naming each difference.
func resolveResume(cmd *cobra.Command, f *trainFlags, specs []algo.Spec) (*algo.Resolved, error) {
	fl := cmd.Flags().Changed
	if !fl("out") {
		return nil, fmt.Errorf("train: --resume without --config needs --out DIR, the run directory to continue (its config.yaml holds the settings)")
	}
	data, path, err := algo.ReadRunConfig(f.out)
	if err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	saved, err := algo.Resolve(data, specs, algo.Overrides{Out: &f.out, Envs: envMaker()})
	if err != nil {
		return nil, fmt.Errorf("train: %s: %w", path, err)
	}
	var diff []string
	if fl("algo") && f.algo != saved.Header.Algo {
		diff = append(diff, fmt.Sprintf("--algo %s (the run's: %s)", f.algo, saved.Header.Algo))
	}
	if fl("env") && f.env != saved.Header.Env {
		diff = append(diff, fmt.Sprintf("--env %s (the run's: %s)", f.env, saved.Header.Env))
	}
	if len(diff) == 0 {
		ov := algo.Overrides{Set: f.set, Out: &f.out, Envs: envMaker()}
		ifSet(fl, "seed", &ov.Seed, &f.seed)
		ifSet(fl, "steps", &ov.Steps, &f.steps)
		ifSet(fl, "log-every", &ov.LogEvery, &f.logEvery)
		res, err := algo.Resolve(data, specs, ov)
		if err != nil {
			return nil, fmt.Errorf("train: %s with the command line's settings: %w", path, err)
		}
		d, err := algo.ResumeDiff(saved, res)
		if err != nil {
			return nil, fmt.Errorf("train: %w", err)
		}
		if d == "" {
			return res, nil
		}
		diff = append(diff, d)
	}
	return nil, fmt.Errorf("train: %w %s: the command line changes the run's settings (%s): %s; only --steps and --log-every may change on resume",
		algo.ErrCannotResume, f.out, path, strings.Join(diff, ", "))
}

func newEvalCmd() *cobra.Command {
	var o run.EvalOptions
	var envID string
	cmd := &cobra.Command{
		Use:   "eval",
		Short: "evaluate a trained agent deterministically and print mean ± std return",
		Example: `  herd eval --run runs/ppo-CartPole-v1-1 --episodes 20
  herd eval --run runs/ppo-CartPole-v1-1 --env CartPole-v0`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("env") {
				o.Env = &envID
			}
			o.Specs, o.Envs = all.Specs(), envMaker()
			return run.Eval(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), o)
		},
	}
	cmd.Flags().StringVar(&o.Dir, "run", "", "run directory written by herd train")
	cmd.Flags().IntVar(&o.Episodes, "episodes", 10, "number of episodes")
	cmd.Flags().Uint64Var(&o.Seed, "seed", 0, "evaluation seed (episode k is reset with a seed derived from it)")
	cmd.Flags().StringVar(&envID, "env", "", "evaluate on this env instead of the run's (its spaces must match the checkpoint's)")
	return cmd
}

// ifSet points *dst at v when the flag name was set (changed): only flags
// given on the command line override the config file.
func ifSet[T any](changed func(string) bool, name string, dst **T, v *T) {
	if changed(name) {
		*dst = v
	}
}
