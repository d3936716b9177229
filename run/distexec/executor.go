package distexec

import (
	"context"

	"herd/algo"
)

// Executor describes the dist executor to algo.Admit and the CLI: its
// on-policy topology runs algorithms with a segment learner, its Ape-X
// topology those with a transition learner; M > 1 learners need a
// data-parallel segment learner or a gradient/apply split. Policies act
// away from the envs (policy workers, inline copies), so a policy needs
// no state per env, or, in the on-policy topology of one policy, a state
// the env workers carry (worker.RunEnv).
func Executor() algo.Executor {
	return algo.Executor{
		Name: "dist",
		Doc:  "env, policy and learner workers joined by streams, in one process or over NATS (herd launch)",
		Keys: []string{"env_workers", "policy_workers", "inference", "env_groups", "step_time", "transport", "nats_url",
			"max_policy_lag", "refresh_every", "publish_every", "learners", "sync_batch"},
		Needs: func(h algo.Header) []algo.Need {
			on, off := algo.CanSegmentLearner, algo.CanTransitionLearner
			if h.Runtime.Learners > 1 {
				on, off = on|algo.CanDataParallel, off|algo.CanGradApply
			}
			needs := []algo.Need{{Topology: "on-policy topology", Caps: on | algo.CanStatelessPolicy}}
			if !h.MultiAgent.Enabled() {
				needs = append(needs, algo.Need{Topology: "on-policy topology", Caps: on | algo.CanCarriedState})
			}
			return append(needs, algo.Need{Topology: "Ape-X topology", Caps: off | algo.CanStatelessPolicy})
		},
		Policies: true,
		// Either topology with one learner: see checkpointer.
		Resumable:    true,
		NotResumable: notResumable,
		Scalars:      func(algo.Header) []string { return algo.DistScalars },
		Workers: func(h algo.Header) []algo.WorkerSet {
			rc := h.Runtime
			inline := rc.Inference == algo.InferenceInline // each acts with a policy copy instead of asking policy workers
			return []algo.WorkerSet{{Key: "env_workers", N: rc.EnvWorkers, Envs: true, Policy: inline},
				{Key: "policy_workers", N: rc.PolicyWorkers, Policy: true},
				{Key: "learners", N: rc.Learners, Learner: true}}
		},
		Train: func(ctx context.Context, rt *algo.Runtime, spec algo.Spec, cfg algo.Config) (algo.Model, error) {
			return Train(ctx, rt, spec, cfg, OptionsOf(rt.Header))
		},
	}
}
