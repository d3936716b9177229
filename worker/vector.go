package worker

import (
	"context"
	"fmt"
	"math"
	"slices"

	"herd/algo"
	"herd/internal/rng"
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
	b, err := v.Reset(int64(rng.Derive(cfg.Seed, envStream, cfg.Slot) >> 1))
	if err != nil {
		return fmt.Errorf("worker: env worker %d: reset: %w", cfg.Slot, err)
	}
	obs := append([]float32(nil), b.Obs...)
	req := &transport.InferRequest{Worker: cfg.Slot}
	boot := &transport.InferRequest{Worker: cfg.Slot}
	inferT, pushT := newCallTimer(ctx, to.Infer), newCallTimer(ctx, to.Push)
	defer inferT.stop()
	defer pushT.stop()
	met := cfg.Metrics
	if met != nil {
		inferT.retried, pushT.retried = met.inferRetries, met.pushRetries
	}
	ask := func(r *transport.InferRequest, o []float32, rows int) ([]float32, error) {
		r.Rows, r.Obs, r.WeightsVersion = rows, o, math.MaxUint64
		err := retry(inferT, func(c context.Context) error { return inf.Infer(c, r) })
		return r.Out, err
	}
	var acts algo.Acts
	var bv [1]float32
	var buf []byte
	seg := sample.NewSegment(cfg.Steps, m, obsDim, actDim)
	seg.Versions = make([]uint64, cfg.Steps)
	prog := cfg.Resume
	step := prog.Steps
	for n := 0; cfg.Segments == 0 || n < cfg.Segments; n++ {
		seg.Episodes = seg.Episodes[:0]
		seg.Worker = cfg.Slot
		for t := range cfg.Steps {
			row := t * m
			copy(seg.Obs[row*obsDim:], obs)
			out, err := ask(req, obs, m)
			if err != nil {
				return err
			}
			seg.Versions[t] = req.WeightsVersion
			outDim := len(out) / m
			s.SampleTo(&acts, out, m, step)
			copy(seg.Actions[row*actDim:], acts.Actions[:m*actDim])
			copy(seg.LogProbs[row:], acts.LogProbs[:m])
			copy(seg.Values[row:], acts.Values[:m])
			b, err := v.Step(acts.EnvActions[:m*actDim])
			if err != nil {
				return fmt.Errorf("worker: env worker %d: %w", cfg.Slot, err)
			}
			for j := range m {
				i := row + j
				seg.Rewards[i], seg.Dones[i] = b.Rewards[j], 0
				if !b.Done(j) {
					continue
				}
				seg.Dones[i] = 1
				if b.Truncated[j] && !b.Terminated[j] {
					bo, err := ask(boot, b.FinalObsRow(j), 1)
					if err != nil {
						return err
					}
					val.ValuesTo(bv[:], bo[:outDim], 1)
					seg.Rewards[i] += cfg.Gamma * bv[0]
				}
				if info := b.Infos[j]; info.HasEpisode {
					seg.Episodes = append(seg.Episodes, sample.Episode{Return: info.Episode.Return, Length: info.Episode.Length, At: t})
				}
			}
			copy(obs, b.Obs)
			step += int64(m)
			if met != nil {
				met.steps.Add(float64(m))
				met.version.Set(float64(seg.Versions[t]))
			}
		}
		seg.Version = slices.Min(seg.Versions)
		copy(seg.NextObs, obs)
		out, err := ask(req, obs, m)
		if err != nil {
			return err
		}
		val.ValuesTo(seg.LastValues, out, m)
		if buf, err = seg.AppendEncode(buf[:0]); err != nil {
			return err
		}
		// The stream takes ownership of what it is given.
		msg := append([]byte(nil), buf...)
		id := transport.SampleID{Slot: cfg.Slot, Incarnation: prog.Incarnation, Seq: prog.Seq + 1}
		if err := push(pushT, samples, id, msg, met, len(seg.Episodes)); err != nil {
			return err
		}
		prog.Seq, prog.Steps = id.Seq, step
		if cfg.OnPushed != nil {
			cfg.OnPushed(prog)
		}
	}
	return nil
}
