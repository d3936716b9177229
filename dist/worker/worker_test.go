package worker

import (
	"context"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"herd/algo"
	"herd/dist"
	"herd/env"
	"herd/nn"
	"herd/sample"
	"herd/weights"
)

// A small fake on-policy algorithm on CartPole: the policy is linear
// (logit difference w·obs, value 0), the sampler draws Bernoulli actions
// from it, and the learner nudges w against the pole angle (enough to
// change the weights every iteration; the test checks plumbing, not
// learning).

type fakePolicy struct {
	w []*nn.Param
	n uint64
}

func newFakeParams() []*nn.Param {
	return []*nn.Param{{Name: "w", Shape: []int{4}, Value: make([]float32, 4)}}
}

func (p *fakePolicy) OutDim() int     { return 2 }
func (p *fakePolicy) Version() uint64 { return p.n }
func (p *fakePolicy) SetWeights(v *weights.Version) error {
	if err := v.CopyTo(p.w); err != nil {
		return err
	}
	p.n = v.N
	return nil
}
func (p *fakePolicy) ForwardTo(dst, obs []float32, n int) []float32 {
	w := p.w[0].Value
	for i := range n {
		var s float32
		for k := range 4 {
			s += w[k] * obs[i*4+k]
		}
		dst[2*i], dst[2*i+1] = s, float32(p.n)
	}
	return dst[:2*n]
}

type fakeSampler struct{ r *rand.Rand }

func (s *fakeSampler) SampleTo(dst *algo.Acts, out []float32, n int, _ int64) {
	for _, b := range []*[]float32{&dst.Actions, &dst.EnvActions, &dst.LogProbs, &dst.Values} {
		if cap(*b) < n {
			*b = make([]float32, n)
		}
		*b = (*b)[:n]
	}
	for i := range n {
		p1 := 1 / (1 + math.Exp(-float64(out[2*i])))
		a := float32(0)
		if s.r.Float64() < p1 {
			a = 1
		}
		dst.Actions[i], dst.EnvActions[i] = a, a
		dst.LogProbs[i] = float32(math.Log(max(1e-9, p1*float64(a)+(1-p1)*float64(1-a))))
		dst.Values[i] = out[2*i+1]
	}
}
func (s *fakeSampler) ValuesTo(dst, out []float32, n int) {
	for i := range n {
		dst[i] = out[2*i+1]
	}
}

type fakeLearner struct {
	w []*nn.Param
	n uint64
}

func (l *fakeLearner) Learn(_ context.Context, seg *sample.Segment) ([]algo.Stat, error) {
	if err := seg.Check(); err != nil {
		return nil, err
	}
	for i := range seg.T * seg.N {
		l.w[0].Value[2] -= 0.001 * seg.Obs[i*4+2] * (2*seg.Actions[i] - 1)
	}
	l.n++
	return []algo.Stat{{Name: "n", Value: float64(l.n)}}, nil
}
func (l *fakeLearner) Weights() *weights.Version { return weights.New(l.n, l.w) }

func fakePieces() *algo.Pieces {
	return &algo.Pieces{
		NewPolicy:         func() (algo.PolicyNet, error) { return &fakePolicy{w: newFakeParams()}, nil },
		NewSampler:        func(_ int, r *rand.Rand) (algo.Sampler, error) { return &fakeSampler{r: r}, nil },
		NewSegmentLearner: func() (algo.SegmentLearner, error) { return &fakeLearner{w: newFakeParams()}, nil },
	}
}

// topology runs 2 env workers (4 CartPoles each), 2 policy workers and a
// learner on tr for iters iterations and checks what the learner saw.
func topology(t *testing.T, mk func() dist.Transport) {
	const iters, T = 12, 32
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	opt := dist.Options{ObsDim: 4, OutDim: 2, Like: newFakeParams(), Capacity: 2}
	run := "topo"
	open := func() (dist.InferenceStream, dist.SampleStream, dist.ParamService) {
		tr := mk()
		inf, err := tr.Inference(ctx, run, opt)
		if err != nil {
			t.Fatal(err)
		}
		s, err := tr.Samples(ctx, run, opt)
		if err != nil {
			t.Fatal(err)
		}
		p, err := tr.Params(ctx, run, opt)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = inf.Close(); _ = s.Close(); _ = p.Close() })
		return inf, s, p
	}
	pieces := fakePieces()
	wctx, stopWorkers := context.WithCancel(ctx)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 2 {
		inf, _, p := open()
		wg.Go(func() {
			if err := RunPolicy(wctx, pieces, inf, p); err != nil {
				errs <- err
			}
		})
	}
	var envsPushed atomic.Int64
	for slot := range 2 {
		inf, s, _ := open()
		envs := make([]env.Env, 4)
		for j := range envs {
			e, err := env.Make("CartPole-v1", env.WithEpisodeStatistics())
			if err != nil {
				t.Fatal(err)
			}
			envs[j] = e
			defer e.Close()
		}
		wg.Go(func() {
			err := RunEnv(wctx, EnvConfig{Slot: slot, Seed: 1, Envs: envs, Steps: T, Gamma: 0.99}, pieces, inf, s)
			if err != nil && wctx.Err() == nil {
				errs <- err
			}
			envsPushed.Add(1)
		})
	}
	_, s, p := open()
	t0 := time.Now()
	var versions []uint64
	episodes := 0
	l, err := RunLearner(ctx, LearnerConfig{Iterations: iters, OnIteration: func(it int, seg *sample.Segment, stats []algo.Stat) {
		if seg.T != T || seg.N != 4 {
			t.Errorf("segment %d is %d × %d", it, seg.T, seg.N)
		}
		versions = append(versions, seg.Version)
		episodes += len(seg.Episodes)
	}}, pieces, s, p)
	t.Logf("learner done after %v", time.Since(t0))
	stopWorkers()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if got := l.Weights().N; got != iters {
		t.Errorf("learner at version %d, want %d", got, iters)
	}
	if v := p.Latest(); v == nil || v.N != iters {
		t.Errorf("parameter service latest %v, want %d", v, iters)
	}
	// Env workers act with newer weights as the learner publishes them.
	if versions[len(versions)-1] == 0 {
		t.Errorf("segment weight versions %v never moved past 0", versions)
	}
	if episodes == 0 {
		t.Errorf("no episode ended in %d segments", iters)
	}
	t.Logf("segment weight versions %v, %d episodes", versions, episodes)
}

func TestTopologyInproc(t *testing.T) {
	ip := dist.NewInproc()
	topology(t, func() dist.Transport { return ip })
}

func TestTopologyNATS(t *testing.T) {
	srv, err := dist.StartServer(dist.ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown) // after the connections close
	topology(t, func() dist.Transport {
		nc, err := nats.Connect(srv.URL())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		n, err := dist.NewNATS(nc)
		if err != nil {
			t.Fatal(err)
		}
		return n
	})
}
