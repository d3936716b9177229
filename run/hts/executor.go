package hts

import (
	"context"

	"herd/algo"
)

// Executor describes HTS to algo.Admit and the CLI: it runs any algorithm
// with a segment learner, several policies too, and reads env_workers,
// policy_workers, alpha and step_time.
func Executor() algo.Executor {
	return algo.Executor{
		Name:     "hts",
		Doc:      "synchronous high-throughput sampling: env and policy workers, one update of lag, the same bits for any worker count",
		Keys:     []string{"env_workers", "policy_workers", "alpha", "step_time"},
		Needs:    func(algo.Header) []algo.Need { return []algo.Need{{Caps: algo.CanSegmentLearner}} },
		Policies: true,
		// A run of one policy saves its state at barriers (checkpointer).
		Resumable: true,
		Workers: func(h algo.Header) []algo.WorkerSet {
			return []algo.WorkerSet{{Key: "policy_workers", N: h.Runtime.PolicyWorkers, Policy: true}}
		},
		Train: func(ctx context.Context, rt *algo.Runtime, spec algo.Spec, cfg algo.Config) (algo.Model, error) {
			return Train(ctx, rt, spec, cfg, OptionsOf(rt.Header))
		},
	}
}
