package flow

import "herd/algo"

// Executor describes the flow executor to algo.Admit and the CLI: it runs
// the asynchronous plan an algorithm declares (AsyncPlan), or the plan PlanOf
// builds for a segment or transition learner, and reads env_workers,
// transport, nats_url and num_async. A rollout worker's policy copy keeps
// the state of the worker's own envs (a recurrent policy) and records it
// in each segment, which an algorithm's own plan and SyncPlan's joined
// segments hand to the learner; the replay plans' transitions do not
// carry it, so they need a stateless policy.
func Executor() algo.Executor {
	return algo.Executor{
		Name: "flow",
		Doc:  "a dataflow plan over rollout workers (the algorithm's own, or the synchronous or replay plan its learner fits), in one process or over NATS",
		Keys: []string{"env_workers", "transport", "nats_url", "num_async"},
		Needs: func(algo.Header) []algo.Need {
			return []algo.Need{{Topology: "its own plan", Caps: algo.CanPlan},
				{Topology: "SyncPlan", Caps: algo.CanSegmentLearner},
				{Topology: "ReplayPlan or ApeXPlan", Caps: algo.CanTransitionLearner | algo.CanStatelessPolicy}}
		},
		Scalars: func(h algo.Header) []string {
			if t := h.Runtime.Transport; t != "" && t != "inproc" {
				return algo.FlowTransportScalars
			}
			return nil
		},
		Train:     Train,
		Resumable: true,
		NotResumable: func(h algo.Header, spec algo.Spec) string {
			if h.Runtime.Transport == "nats" {
				return "workers served over NATS keep their state elsewhere; no training state is saved to continue from"
			}
			return ""
		},
	}
}
