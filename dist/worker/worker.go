package worker

import (
	"context"
	"fmt"
	"time"

	"herd/algo"
	"herd/dist"
	"herd/env"
	"herd/internal/rng"
	"herd/sample"
)

// Valuer reads state values off policy outputs without drawing random
// numbers (as run/hts needs too). The env worker uses it for the
// truncation bootstrap and the segment's last values; a sampler that does
// not implement it follows the on-policy convention that V(s) ends every
// row of outputs.
type Valuer interface {
	ValuesTo(dst, out []float32, n int)
}

// lastColumn reads V(s) from the last column of each output row.
type lastColumn struct{}

func (lastColumn) ValuesTo(dst, out []float32, n int) {
	w := len(out) / n
	for i := range n {
		dst[i] = out[(i+1)*w-1]
	}
}

// Timeouts bound every wait on a peer; after one runs out the call is
// retried, until the role's context ends. Zero fields take the defaults.
type Timeouts struct {
	// Infer bounds one inference round trip (default 1 s). A request sent
	// to a policy worker that dies with it is never answered: this bound is
	// the env worker's stall before it asks again (and the queue group
	// routes the retry to a live member), so it stays well under the 2 s
	// stall that issue #13 allows.
	Infer time.Duration
	// Push bounds one sample push, back-pressure included (default 30 s).
	Push time.Duration
}

func (t Timeouts) withDefaults() Timeouts {
	if t.Infer <= 0 {
		t.Infer = time.Second
	}
	if t.Push <= 0 {
		t.Push = 30 * time.Second
	}
	return t
}

// EnvConfig configures one env worker.
type EnvConfig struct {
	// Slot numbers the env worker (0, 1, …); its randomness derives from
	// (Seed, "env-worker", Slot) and its envs' seeds from (Seed,
	// "dist/env", Slot·len(Envs)+j).
	Slot int
	Seed uint64
	// Envs are the worker's envs (made with env.WithEpisodeStatistics to
	// report episodes). The worker resets them; the caller closes them.
	Envs []env.Env
	// Steps is T, the steps per segment.
	Steps int
	// Gamma discounts the truncation bootstrap.
	Gamma float32
	// Segments is how many segments to push (0: until ctx ends).
	Segments int
	Timeouts Timeouts
}

// RunEnv runs an env worker: it steps its envs with actions sampled from
// the policy workers' outputs and pushes one segment per Steps steps. It
// returns nil after cfg.Segments segments, or ctx's error.
func RunEnv(ctx context.Context, cfg EnvConfig, pieces *algo.Pieces, inf dist.InferenceStream, samples dist.SampleStream) error {
	m := len(cfg.Envs)
	if m == 0 || cfg.Steps < 1 || pieces == nil || pieces.NewSampler == nil {
		return fmt.Errorf("worker: env worker %d needs envs (%d), steps ≥ 1 (%d) and a sampler", cfg.Slot, m, cfg.Steps)
	}
	to := cfg.Timeouts.withDefaults()
	s, err := pieces.NewSampler(m, rng.New(cfg.Seed, "env-worker", cfg.Slot))
	if err != nil {
		return err
	}
	val, ok := s.(Valuer)
	if !ok {
		val = lastColumn{}
	}
	obsDim, actDim := cfg.Envs[0].ObservationSpace().Dim(), cfg.Envs[0].ActionSpace().Dim()
	obs := make([]float32, m*obsDim)
	for j, e := range cfg.Envs {
		o, _, err := e.Reset(int64(rng.Derive(cfg.Seed, "dist/env", cfg.Slot*m+j) >> 1))
		if err != nil {
			return fmt.Errorf("worker: reset env %d: %w", j, err)
		}
		copy(obs[j*obsDim:], o)
	}
	req := &dist.InferRequest{Worker: cfg.Slot}
	boot := &dist.InferRequest{Worker: cfg.Slot}
	inferT, pushT := newCallTimer(ctx, to.Infer), newCallTimer(ctx, to.Push)
	defer inferT.stop()
	defer pushT.stop()
	ask := func(r *dist.InferRequest, o []float32, rows int) ([]float32, error) {
		r.Rows, r.Obs = rows, o
		err := retry(inferT, func(c context.Context) error { return inf.Infer(c, r) })
		return r.Out, err
	}
	var acts algo.Acts
	var v [1]float32
	var buf []byte
	seg := sample.NewSegment(cfg.Steps, m, obsDim, actDim)
	var step int64
	for k := 0; cfg.Segments == 0 || k < cfg.Segments; k++ {
		seg.Episodes = seg.Episodes[:0]
		seg.Worker = cfg.Slot
		for t := range cfg.Steps {
			row := t * m
			copy(seg.Obs[row*obsDim:], obs)
			out, err := ask(req, obs, m)
			if err != nil {
				return err
			}
			if t == 0 {
				seg.Version = req.WeightsVersion
			}
			outDim := len(out) / m
			s.SampleTo(&acts, out, m, step)
			copy(seg.Actions[row*actDim:], acts.Actions[:m*actDim])
			copy(seg.LogProbs[row:], acts.LogProbs[:m])
			copy(seg.Values[row:], acts.Values[:m])
			for j, e := range cfg.Envs {
				i := row + j
				o, r, term, trunc, info, err := e.Step(acts.EnvActions[j*actDim : (j+1)*actDim])
				if err != nil {
					return fmt.Errorf("worker: env %d: %w", j, err)
				}
				seg.Rewards[i], seg.Dones[i] = float32(r), 0
				if term || trunc {
					seg.Dones[i] = 1
					if trunc && !term {
						bo, err := ask(boot, o, 1)
						if err != nil {
							return err
						}
						val.ValuesTo(v[:], bo[:outDim], 1)
						seg.Rewards[i] += cfg.Gamma * v[0]
					}
					if info.HasEpisode {
						seg.Episodes = append(seg.Episodes, sample.Episode{Return: info.Episode.Return, Length: info.Episode.Length, At: t})
					}
					if o, _, err = e.Reset(env.NoSeed); err != nil {
						return fmt.Errorf("worker: reset env %d: %w", j, err)
					}
				}
				copy(obs[j*obsDim:(j+1)*obsDim], o)
			}
			step += int64(m)
		}
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
		b := append([]byte(nil), buf...)
		if err := retry(pushT, func(c context.Context) error { return samples.Push(c, cfg.Slot, b) }); err != nil {
			return err
		}
	}
	return nil
}

// RunPolicy runs a policy worker: it answers batched inference requests
// with the newest weights the parameter service knows, until ctx ends.
func RunPolicy(ctx context.Context, pieces *algo.Pieces, inf dist.InferenceStream, params dist.ParamService) error {
	p, err := pieces.NewPolicy()
	if err != nil {
		return err
	}
	var obs, out []float32
	err = inf.Serve(ctx, func(_ context.Context, batch []*dist.InferRequest) error {
		if v := params.Latest(); v != nil && v.N != p.Version() {
			if err := p.SetWeights(v); err != nil {
				return fmt.Errorf("worker: policy weights %d: %w", v.N, err)
			}
		}
		obs = obs[:0]
		rows := 0
		for _, r := range batch {
			obs = append(obs, r.Obs...)
			rows += r.Rows
		}
		out = p.ForwardTo(grow(out, rows*p.OutDim()), obs, rows)
		off := 0
		for _, r := range batch {
			off += copy(r.Out, out[off:])
			r.WeightsVersion = p.Version()
		}
		return nil
	})
	return err
}

func grow(b []float32, n int) []float32 {
	if cap(b) < n {
		return make([]float32, n)
	}
	return b[:n]
}

// LearnerConfig configures the learner.
type LearnerConfig struct {
	// Iterations is how many segments to learn from (0: until ctx ends).
	Iterations int
	// OnIteration, when set, is called after each iteration with the
	// segment learned from and the learner's scalars.
	OnIteration func(iter int, seg *sample.Segment, stats []algo.Stat)
	// OnDrop, when set, is told of every pulled sample that does not
	// decode as a segment; such samples are dropped either way.
	OnDrop func(err error)
}

// RunLearner runs the learner: it publishes the initial weights (version
// 0), then for each segment pulled learns and publishes the next version.
// It returns the learner (to save or evaluate its model) and nil after
// cfg.Iterations, or ctx's error. A sample that does not decode is
// dropped and reported to cfg.OnDrop; it never stops the learner.
func RunLearner(ctx context.Context, cfg LearnerConfig, pieces *algo.Pieces, samples dist.SampleStream, params dist.ParamService) (algo.SegmentLearner, error) {
	if pieces == nil || pieces.NewSegmentLearner == nil {
		return nil, fmt.Errorf("worker: the learner needs an on-policy algorithm (SegmentLearner)")
	}
	l, err := pieces.NewSegmentLearner()
	if err != nil {
		return nil, err
	}
	if c, ok := l.(interface{ Close() error }); ok {
		defer c.Close() // stops helper goroutines; the learner stays usable
	}
	if err := params.Publish(ctx, l.Weights()); err != nil {
		return l, err
	}
	for it := 0; cfg.Iterations == 0 || it < cfg.Iterations; {
		b, err := samples.Pull(ctx)
		if err != nil {
			return l, err
		}
		seg, err := sample.DecodeSegment(b)
		if err != nil {
			if cfg.OnDrop != nil {
				cfg.OnDrop(err)
			}
			continue
		}
		stats, err := l.Learn(ctx, seg)
		if err != nil {
			return l, err
		}
		if err := params.Publish(ctx, l.Weights()); err != nil {
			return l, err
		}
		if cfg.OnIteration != nil {
			cfg.OnIteration(it, seg, stats)
		}
		it++
	}
	return l, nil
}
