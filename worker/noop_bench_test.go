package worker

import (
	"math/rand/v2"
	"testing"
	"time"

	"herd/algo"
	"herd/algo/algotest"
	"herd/env"
	"herd/transport"
	"herd/weights"
)

// noopEnv does nothing: a fixed observation, reward 0, an episode of 1000
// steps (so episode bookkeeping still runs now and then). It measures the
// framework's cost per env step, not an env's.
type noopEnv struct {
	obs [4]float32
	t   int
}

func (e *noopEnv) ObservationSpace() env.Space { return env.UniformBox(-1, 1, 4) }
func (e *noopEnv) ActionSpace() env.Space      { return env.Discrete{N: 2} }
func (e *noopEnv) Reset(int64) ([]float32, env.Info, error) {
	e.t = 0
	return e.obs[:], env.Info{}, nil
}
func (e *noopEnv) Step([]float32) ([]float32, float64, bool, bool, env.Info, error) {
	e.t++
	return e.obs[:], 0, false, e.t >= 1000, env.Info{}, nil
}
func (e *noopEnv) Close() error { return nil }

// noopPolicy is the fake algorithm's policy minus its arithmetic: outputs
// are left as they are (zero), so sampling picks action 0 or 1 by coin.
type noopPolicy struct{ n uint64 }

func (p *noopPolicy) OutDim() int     { return 2 }
func (p *noopPolicy) Version() uint64 { return p.n }
func (p *noopPolicy) SetWeights(v *weights.Version) error {
	p.n = v.N
	return nil
}
func (p *noopPolicy) ForwardTo(dst, _ []float32, n int) []float32 { return dst[:2*n] }

// noopSampler always picks action 0 with log-prob and value 0.
type noopSampler struct{}

func (noopSampler) SampleTo(dst *algo.Acts, _ []float32, n int, _ int64) {
	for _, b := range []*[]float32{&dst.Actions, &dst.EnvActions, &dst.LogProbs, &dst.Values} {
		if cap(*b) < n {
			*b = make([]float32, n)
		}
		*b = (*b)[:n]
		clear(*b)
	}
}
func (noopSampler) ValuesTo(dst, _ []float32, n int) { clear(dst[:n]) }

// BenchmarkTopologyNoop is BenchmarkTopology's in-process topology with a
// no-op env and a no-op policy and sampler (the fake learner, which only
// reads the segment): what is left is the framework — the env worker's loop,
// the inference stream, sample pushes and weight publishes. E envs per env
// worker share one inference request per step. Run with -cpu 1 for a
// per-core figure.
func BenchmarkTopologyNoop(b *testing.B) {
	for _, E := range []int{4, 64, 256} {
		b.Run("envs="+itoa(E), func(b *testing.B) { noopTopology(b, E, false) })
	}
}

// BenchmarkTopologyNoopMetrics is BenchmarkTopologyNoop at 4 envs per env
// worker (one inference round trip per 4 env steps, the worst case) with
// the workers' Prometheus metrics off and on: their cost per env step.
func BenchmarkTopologyNoopMetrics(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "metrics=off"
		if on {
			name = "metrics=on"
		}
		b.Run(name, func(b *testing.B) { noopTopology(b, 4, on) })
	}
}

func noopTopology(b *testing.B, E int, withMetrics bool) {
	pieces := algotest.Pieces()
	pieces.NewPolicy = func() (algo.PolicyNet, error) { return &noopPolicy{}, nil }
	pieces.NewSampler = func(int, *rand.Rand) (algo.Sampler, error) { return noopSampler{}, nil }
	ip := transport.NewInproc()
	benchTopology(b, func() transport.Transport { return ip }, benchShape{policyWorkers: 1, perWorker: E, pieces: pieces,
		newEnv: func() (env.Env, error) { return &noopEnv{}, nil }, envParams: true, metrics: withMetrics})
}

func itoa(n int) string {
	s := ""
	for {
		s = string(rune('0'+n%10)) + s
		n /= 10
		if n == 0 {
			return s
		}
	}
}

// BenchmarkTopologyStepTime is BenchmarkTopology with CartPoles that take
// 1 ms per step (env.WithStepTime, CV 0): in-process streams vs NATS
// loopback when the env, not the carrier, should bound the rate. Env steps
// run one after another within an env worker, so the steady-state ceiling is
// 2 workers × 1000 steps/s; segments the workers queue before the timer
// starts (Capacity 2) inflate short runs, so use ≥ 16384x.
func BenchmarkTopologyStepTime(b *testing.B) {
	for _, name := range []string{"inproc", "nats"} {
		b.Run(name, func(b *testing.B) {
			var mk func() transport.Transport
			if name == "inproc" {
				ip := transport.NewInproc()
				mk = func() transport.Transport { return ip }
			} else {
				dial := natsDialer(b)
				mk = func() transport.Transport { return dial() }
			}
			benchTopology(b, mk, benchShape{policyWorkers: 1, perWorker: 4, pieces: algotest.Pieces(), envParams: true,
				newEnv: func() (env.Env, error) {
					return env.Make("CartPole-v1", env.WithEpisodeStatistics(), env.WithStepTime(env.StepTime{Mean: time.Millisecond}))
				}})
		})
	}
}
