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

// Executors returns herd's executors, local first, for
// algo.RunOptions.Executors and the capability table (algo.Admit).
func Executors() []algo.Executor {
	return []algo.Executor{Local(), hts.Executor(), pal.Executor(), distexec.Executor(), flow.Executor()}
}

// Local is the local executor: the algorithm's own Train (for an
// algorithm that is a dataflow plan, which has none, its plan in-process:
// flow.WithTrain), or, for a run with a multiagent section, one Train per
// policy on its agents' rows (run/multipolicy), which needs algorithms
// that train on the envs their Runtime hands them.
func Local() algo.Executor {
	return algo.Executor{
		Name: algo.LocalExecutor,
		Doc:  "the algorithm's own single-process loop (the default)",
		Needs: func(h algo.Header) []algo.Need {
			if h.MultiAgent.Enabled() {
				return []algo.Need{{Caps: algo.CanAgentRows}}
			}
			return nil
		},
		Policies: true,
		Train: func(ctx context.Context, rt *algo.Runtime, spec algo.Spec, cfg algo.Config) (algo.Model, error) {
			if rt.Header.MultiAgent.Enabled() {
				return multipolicy.Train(ctx, rt, spec, cfg)
			}
			return flow.WithTrain(spec).Train(ctx, rt, cfg)
		},
	}
}
