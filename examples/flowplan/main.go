// Command flowplan writes a custom dataflow plan: PPO with an evaluation
// sub-flow. The training stream is split in two; one copy goes on to the
// metrics, the other evaluates the greedy policy every few iterations, and
// a round-robin Union joins them again:
//
//	train := ForEach(ConcatBatches(GatherSync(ParallelRollouts(workers))), TrainOneStep(workers, learner))
//	copies := Split(train, 2, 1)
//	eval := ForEach(copies[1], every k: Evaluate(the learner's model))
//	return StandardMetricsReporting(r, UnionRoundRobin(copies[0], eval))
//
// A plan is a method Plan(*flow.Run) on the algorithm's config, so the
// config type here embeds ppo.Config and adds one setting; flow.TrainPlan
// runs it with PPO's pieces.
//
//	go run ./examples/flowplan -steps 100000 -eval-every 20
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"herd/algo"
	"herd/algo/ppo"
	"herd/flow"
)

func main() {
	steps := flag.Int64("steps", 100_000, "environment steps")
	every := flag.Int("eval-every", 20, "evaluate the greedy policy every this many iterations")
	seed := flag.Uint64("seed", 1, "run seed")
	flag.Parse()
	if _, err := run(context.Background(), os.Stdout, *seed, *steps, *every); err != nil {
		fmt.Fprintln(os.Stderr, "flowplan:", err)
		os.Exit(1)
	}
}

// evalPPO is PPO's config with an evaluation sub-flow in its plan.
type evalPPO struct {
	ppo.Config
	EvalEvery int
}

// Plan is flow.SyncPlan with the evaluation sub-flow added.
func (c *evalPPO) Plan(r *flow.Run) (flow.Iter[flow.Report], error) {
	workers, err := flow.RolloutWorkers(r, c.NumEnvs, c.NumSteps, c.Gamma)
	if err != nil {
		return nil, err
	}
	learner, err := flow.SegmentLearner(r)
	if err != nil {
		return nil, err
	}
	r.SetBudget(int64(c.NumEnvs * c.NumSteps))
	train := flow.ForEach(flow.ConcatBatches(flow.GatherSync(flow.ParallelRollouts(workers))), flow.TrainOneStep(workers, learner))
	copies := flow.Split(train, 2, 1)
	eval := flow.ForEach(copies[1], evaluate(r, learner, c.EvalEvery))
	return flow.StandardMetricsReporting(r, flow.UnionRoundRobin(copies[0], eval)), nil
}

// evaluate returns the evaluation operator: every k-th training report it
// plays 5 greedy episodes with the learner's model and reports their mean
// as eval/return; the other reports become empty ones (the Union takes
// one item of each sub-flow in turn).
func evaluate(r *flow.Run, learner algo.SegmentLearner, k int) func(flow.Report) (flow.Report, error) {
	n := 0
	return func(flow.Report) (flow.Report, error) {
		if n++; n%k != 0 {
			return flow.Report{}, nil
		}
		model := learner.(algo.Modeler).Model()
		rets, err := algo.Evaluate(r.Ctx, model, r.Header.Envs, r.Header.Env, 5, r.Header.Seed+uint64(n))
		if err != nil {
			return flow.Report{}, err
		}
		mean := 0.0
		for _, x := range rets {
			mean += x / float64(len(rets))
		}
		return flow.Report{Stats: []algo.Stat{{Name: "eval/return", Value: mean}}}, nil
	}
}

// run trains and returns the last evaluation's mean return.
func run(ctx context.Context, w io.Writer, seed uint64, steps int64, every int) (float64, error) {
	h := algo.DefaultHeader()
	h.Algo, h.Env, h.Seed, h.Steps = "ppo", "CartPole-v1", seed, steps
	h.Runtime.Executor, h.Runtime.EnvWorkers = "flow", 2
	h.EnsureDefaults()
	cfg := &evalPPO{Config: ppo.DefaultConfig(), EvalEvery: every}
	log := &printLog{w: w}
	if _, err := flow.TrainPlan(ctx, &algo.Runtime{Header: h, Log: log}, ppo.Spec(), &cfg.Config, cfg); err != nil {
		return 0, err
	}
	fmt.Fprintf(w, "%d steps, %d evaluations\n", log.step, log.evals)
	return log.last, nil
}

// printLog prints each evaluation with the step it was made at.
type printLog struct {
	w     io.Writer
	step  int64
	evals int
	last  float64
}

func (l *printLog) Episode(int64, float64, int) {}
func (l *printLog) Step(s int64)                { l.step = s }
func (l *printLog) Scalar(name string, v float64) {
	if name == "eval/return" {
		l.evals++
		l.last = v
		fmt.Fprintf(l.w, "step %6d: eval return %.1f\n", l.step, v)
	}
}
