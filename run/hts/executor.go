package hts

import (
	"context"

	"herd/algo"
)

// Executor describes HTS to algo.Admit and the CLI: it runs any algorithm
// with a segment learner, and reads env_workers, policy_workers, alpha and
// step_time. The policy workers keep a recurrent policy's state per env,
// for the run's one policy: the several policies of a multiagent section
// must be stateless.
func Executor() algo.Executor {
	return algo.Executor{
		Name: "hts",
		Doc:  "synchronous high-throughput sampling: env and policy workers, one update of lag, the same bits for any worker count",
		Keys: []string{"env_workers", "policy_workers", "alpha", "step_time"},
		Needs: func(h algo.Header) []algo.Need {
			if h.MultiAgent.Enabled() {
				return []algo.Need{{Caps: algo.CanSegmentLearner | algo.CanStatelessPolicy}}
			}
			return []algo.Need{{Caps: algo.CanSegmentLearner}}
		},
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
