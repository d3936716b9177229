package flow

import "herd/algo"

// Executor describes the flow executor to algo.Admit and the CLI: it runs
// any algorithm whose config is a plan (Planner) and reads env_workers,
// transport, nats_url and num_async.
func Executor() algo.Executor {
	return algo.Executor{
		Name:  "flow",
		Doc:   "the algorithm's dataflow plan over rollout workers, in one process or over NATS",
		Keys:  []string{"env_workers", "transport", "nats_url", "num_async"},
		Needs: func(algo.Header) []algo.Need { return []algo.Need{{Caps: algo.CanPlan}} },
		Scalars: func(h algo.Header) []string {
			if t := h.Runtime.Transport; t != "" && t != "inproc" {
				return algo.FlowTransportScalars
			}
			return nil
		},
		Train: Train,
	}
}
