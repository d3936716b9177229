// Package run lists herd's executors: the ways an algorithm's pieces
// (algo.Pieces: policy, sampler, learner) are placed on goroutines. The
// local executor is each algorithm's own Train; the others live in
// sub-packages (run/hts, run/pal, run/distexec) or in package flow (the
// algorithm's dataflow plan) and are handed to algo.TrainRun
// through Executors.
//
// Train is `herd train`: algo.TrainRun with every executor, the progress
// and outcome lines, an optional Prometheus endpoint (ServeLive) and CPU
// profile. Eval is `herd eval`. DirMode, StepsNote, WroteLine and DoneLine
// are shared with herd launch's learner (package launch).
package run

import (
	"context"

	"herd/algo"
	"herd/flow"
	"herd/run/distexec"
	"herd/run/hts"
	"herd/run/multipolicy"
	"herd/run/pal"
)

// Executors returns every executor other than local, by runtime.executor
// name, for algo.RunOptions.Executors.
func Executors() map[string]algo.Executor {
	return map[string]algo.Executor{
		"hts": func(ctx context.Context, rt *algo.Runtime, spec algo.Spec, cfg algo.Config) (algo.Model, error) {
			return hts.Train(ctx, rt, spec, cfg, hts.OptionsOf(rt.Header))
		},
		"dist": func(ctx context.Context, rt *algo.Runtime, spec algo.Spec, cfg algo.Config) (algo.Model, error) {
			return distexec.Train(ctx, rt, spec, cfg, distexec.OptionsOf(rt.Header))
		},
		"pal": func(ctx context.Context, rt *algo.Runtime, spec algo.Spec, cfg algo.Config) (algo.Model, error) {
			return pal.Train(ctx, rt, spec, cfg, pal.OptionsOf(rt.Header))
		},
		"flow": flow.Train,
		// A run with a multiagent section: one local Train per policy.
		algo.MultiPolicyExecutor: multipolicy.Train,
	}
}
