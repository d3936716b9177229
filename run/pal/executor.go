package pal

import (
	"context"
	"fmt"

	"herd/algo"
)

// Executor describes PAL to algo.Admit and the CLI: it runs any algorithm
// with a transition learner (M > 1 learners: one whose updates split into
// gradient and apply steps) and reads the actor, learner and rate-limiter
// keys.
func Executor() algo.Executor {
	return algo.Executor{
		Name:     "pal",
		Doc:      "parallel actors and learners around one shared replay, a rate limiter holding the replay ratio",
		Keys:     []string{"actors", "learners", "learner_mode", "sync_batch", "update_interval", "refresh_every", "publish_every", "max_lag"},
		Requires: algo.CanStatelessPolicy,
		Needs: func(h algo.Header) []algo.Need {
			c := algo.CanTransitionLearner
			if h.Runtime.Learners > 1 {
				c |= algo.CanGradApply
			}
			return []algo.Need{{Caps: c}}
		},
		Check: func(h algo.Header) error {
			if rc := h.Runtime; rc.SyncBatch != "" && rc.LearnerMode != ModeSync {
				return fmt.Errorf("%w: runtime.sync_batch %q needs learner_mode sync", ErrConfig, rc.SyncBatch)
			}
			return nil
		},
		Workers: func(h algo.Header) []algo.WorkerSet {
			return []algo.WorkerSet{{Key: "actors", N: h.Runtime.Actors, Envs: true, Policy: true},
				{Key: "learners", N: h.Runtime.Learners, Learner: true}}
		},
		Resumable: true,
		Train: func(ctx context.Context, rt *algo.Runtime, spec algo.Spec, cfg algo.Config) (algo.Model, error) {
			return Train(ctx, rt, spec, cfg, OptionsOf(rt.Header))
		},
	}
}
