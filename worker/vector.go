package worker

import (
	"context"
	"fmt"

	"herd/algo"
	"herd/internal/rng"
	"herd/rollout"
	"herd/transport"
)

// RunEnvVector is RunEnv on envs given as one vector (cfg.Vector in place
// of cfg.Envs): each step asks the policy workers for the outputs of all
// its rows in one request, samples them with one sampler on (Seed,
// "env-worker", Slot), and steps the vector once. It is the env worker of
// one policy of a multi-agent run, whose vector is that policy's part of
// the agents' rows (env.SplitVector): the parts step in lockstep, so the
// policies' env workers, each on its own goroutine with its own streams,
// act in the same envs. The vector is reset from (Seed, "dist/env",
// Slot); env groups and inline inference are not available.
func RunEnvVector(ctx context.Context, cfg EnvConfig, pieces *algo.Pieces, inf transport.InferenceStream, samples transport.SampleStream) error {
	v := cfg.Vector
	if v == nil || cfg.Steps < 1 || pieces == nil || pieces.NewSampler == nil || inf == nil {
		return fmt.Errorf("worker: env worker %d needs a vector, steps ≥ 1 (%d), a sampler and an inference stream", cfg.Slot, cfg.Steps)
	}
	if cfg.Groups > 1 {
		return fmt.Errorf("worker: env worker %d: %w: env groups are not available on a vector", cfg.Slot, ErrGroups)
	}
	m := v.NumEnvs()
	to := cfg.Timeouts.withDefaults()
	actStream, envStream := streams(cfg.Resume.Incarnation)
	s, err := pieces.NewSampler(m, rng.New(cfg.Seed, actStream, cfg.Slot))
	if err != nil {
		return err
	}
	inferT := newCallTimer(ctx, to.Infer)
	defer inferT.stop()
	if cfg.Metrics != nil {
		inferT.retried = cfg.Metrics.inferRetries
	}
	pol := newStreamPolicy(cfg.Slot, m, m, 0, s, inf, inferT, nil, cfg.Metrics, cfg.Timing)
	if cfg.Timing != nil {
		v = timedVector{Vector: v, ph: pol.ph, tm: cfg.Timing}
	}
	loop := rollout.NewSegments(cfg.Slot, v, pol, cfg.Gamma)
	if err := loop.Reset(int64(rng.Derive(cfg.Seed, envStream, cfg.Slot) >> 1)); err != nil {
		return fmt.Errorf("worker: env worker %d: %w", cfg.Slot, err)
	}
	return pushSegments(ctx, cfg, loop, m, v.ObservationSpace().Dim(), v.ActionSpace().Dim(), nil, pol.ph, samples)
}
