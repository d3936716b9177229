// Command train shows herd's Go API for training: PPO on CartPole-v1 with
// CleanRL's defaults, reported to an in-memory metrics.Recorder, then
// evaluated deterministically. `herd train --config
// configs/ppo-cartpole.yaml` does the same with files and a progress bar.
//
//	go run ./examples/train -steps 100000
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"herd/algo"
	"herd/algo/ppo"
	"herd/metrics"
)

func main() {
	steps := flag.Int64("steps", 100_000, "environment steps")
	seed := flag.Uint64("seed", 1, "run seed")
	flag.Parse()
	if _, err := run(context.Background(), os.Stdout, *seed, *steps); err != nil {
		fmt.Fprintln(os.Stderr, "train:", err)
		os.Exit(1)
	}
}

// run trains, prints the learning outcome and returns the evaluation mean.
func run(ctx context.Context, w io.Writer, seed uint64, steps int64) (float64, error) {
	// The run header every algorithm shares, and PPO's own config.
	h := algo.DefaultHeader()
	h.Algo, h.Env, h.Seed, h.Steps = "ppo", "CartPole-v1", seed, steps
	cfg := ppo.DefaultConfig()

	// A Recorder with no directory keeps the statistics in memory only.
	rec, err := metrics.NewRecorder(metrics.Options{Algo: h.Algo, Env: h.Env, Seed: h.Seed,
		TotalSteps: h.Steps, LogEvery: h.LogEvery, Scalars: ppo.Scalars()})
	if err != nil {
		return 0, err
	}
	agent, err := ppo.Train(ctx, &algo.Runtime{Header: h, Log: rec}, &cfg)
	if err != nil {
		return 0, err
	}
	sum, err := rec.Close(false)
	if err != nil {
		return 0, err
	}
	fmt.Fprintf(w, "trained %d steps in %.1f s (%.0f steps/s); return over the last 100 episodes %.1f\n",
		sum.Steps, sum.WallSeconds, sum.SPS, sum.FinalReturnMean100)

	// The trained agent is an algo.Policy: evaluate it greedily.
	returns, err := algo.Evaluate(ctx, agent, h.Envs, h.Env, 10, 0)
	if err != nil {
		return 0, err
	}
	mean, std := algo.MeanStd(returns)
	fmt.Fprintf(w, "greedy evaluation over %d episodes: %.1f ± %.1f\n", len(returns), mean, std)
	return mean, nil
}
