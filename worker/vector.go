package worker

import (
	"context"
	"fmt"
	"math"
	"slices"

	"herd/algo"
	"herd/internal/rng"
	"herd/rollout"
	"herd/sample"
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
	val, ok := s.(Valuer)
	if !ok {
		val = lastColumn{}
	}
	obsDim, actDim := v.ObservationSpace().Dim(), v.ActionSpace().Dim()
	inferT, pushT := newCallTimer(ctx, to.Infer), newCallTimer(ctx, to.Push)
	defer inferT.stop()
	defer pushT.stop()
	met := cfg.Metrics
	if met != nil {
		inferT.retried, pushT.retried = met.inferRetries, met.pushRetries
	}
	pol := &streamPolicy{inf: inf, timer: inferT, sampler: s, val: val,
		req: &transport.InferRequest{Worker: cfg.Slot}, boot: &transport.InferRequest{Worker: cfg.Slot}}
	loop := rollout.NewSegments(cfg.Slot, v, pol, cfg.Gamma)
	if err := loop.Reset(int64(rng.Derive(cfg.Seed, envStream, cfg.Slot) >> 1)); err != nil {
		return fmt.Errorf("worker: env worker %d: %w", cfg.Slot, err)
	}
	var buf []byte
	seg := sample.NewSegment(cfg.Steps, m, obsDim, actDim)
	seg.Versions = make([]uint64, cfg.Steps)
	prog := cfg.Resume
	loop.Steps = prog.Steps
	for n := 0; cfg.Segments == 0 || n < cfg.Segments; n++ {
		if err := loop.Collect(seg); err != nil {
			return fmt.Errorf("worker: env worker %d: %w", cfg.Slot, err)
		}
		seg.Version = slices.Min(seg.Versions)
		if met != nil {
			met.steps.Add(float64(m * cfg.Steps))
			met.version.Set(float64(seg.Versions[cfg.Steps-1]))
		}
		if buf, err = seg.AppendEncode(buf[:0]); err != nil {
			return err
		}
		// The stream takes ownership of what it is given.
		msg := append([]byte(nil), buf...)
		id := transport.SampleID{Slot: cfg.Slot, Incarnation: prog.Incarnation, Seq: prog.Seq + 1}
		if err := push(pushT, samples, id, msg, met, len(seg.Episodes)); err != nil {
			return err
		}
		prog.Seq, prog.Steps = id.Seq, loop.Steps
		if cfg.OnPushed != nil {
			cfg.OnPushed(prog)
		}
	}
	return nil
}

// streamPolicy is the rollout Policy of policy workers reached over an
// inference stream: the outputs for all rows in one request (retried
// within the call timer), sampled here with the worker's own sampler.
type streamPolicy struct {
	inf       transport.InferenceStream
	timer     *callTimer
	sampler   algo.Sampler
	val       Valuer
	req, boot *transport.InferRequest
}

func (p *streamPolicy) ask(r *transport.InferRequest, obs []float32, rows int) ([]float32, error) {
	r.Rows, r.Obs, r.WeightsVersion = rows, obs, math.MaxUint64
	err := retry(p.timer, func(c context.Context) error { return p.inf.Infer(c, r) })
	return r.Out, err
}

func (p *streamPolicy) Act(acts *algo.Acts, obs []float32, n int, step int64) error {
	out, err := p.ask(p.req, obs, n)
	if err != nil {
		return err
	}
	p.sampler.SampleTo(acts, out, n, step)
	return nil
}

// ActVersion is the version of the weights that answered the last Act.
func (p *streamPolicy) ActVersion() uint64 { return p.req.WeightsVersion }

func (p *streamPolicy) Values(dst, obs []float32, n int) ([]float32, error) {
	out, err := p.ask(p.boot, obs, n)
	if err != nil {
		return nil, err
	}
	if cap(dst) < n {
		dst = make([]float32, n)
	}
	dst = dst[:n]
	p.val.ValuesTo(dst, out, n)
	return dst, nil
}
