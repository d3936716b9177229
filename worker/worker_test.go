package worker

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"herd/algo"
	"herd/algo/algotest"
	"herd/env"
	"herd/sample"
	"herd/transport"
)

// topology runs 2 env workers (4 CartPoles each), 2 policy workers and a
// learner on tr for iters iterations and checks what the learner saw.
func topology(t *testing.T, mk func() transport.Transport) {
	const iters, T = 12, 32
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	opt := transport.Options{ObsDim: 4, OutDim: 2, Like: algotest.NewParams(), Capacity: 2}
	run := "topo"
	open := func() (transport.InferenceStream, transport.SampleStream, transport.ParamService) {
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
	pieces := algotest.Pieces()
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
	endWorkers(t, stopWorkers, &wg, errs, err)
	if got := l.Weights().N; got != iters {
		t.Errorf("learner at version %d, want %d", got, iters)
	}
	if v := p.Latest(); v == nil || v.N != iters {
		t.Errorf("parameter service latest %v, want %d", v, iters)
	}
	// Env workers act with newer weights as the learner publishes them (the
	// last segment may be a slow worker's first, gathered with version 0).
	if slices.Max(versions) == 0 {
		t.Errorf("segment weight versions %v never moved past 0", versions)
	}
	if episodes == 0 {
		t.Errorf("no episode ended in %d segments", iters)
	}
	t.Logf("segment weight versions %v, %d episodes", versions, episodes)
}

func TestTopologyInproc(t *testing.T) {
	ip := transport.NewInproc()
	topology(t, func() transport.Transport { return ip })
}

func TestTopologyNATS(t *testing.T) {
	dial := natsDialer(t)
	topology(t, func() transport.Transport { return dial() })
}

// natsDialer starts an embedded NATS server for tb and returns a dialer
// of connections to it; tb closes them, then shuts the server down.
func natsDialer(tb testing.TB) func() *transport.NATS {
	tb.Helper()
	srv, err := transport.StartServer(transport.ServerOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(srv.Shutdown)
	return func() *transport.NATS {
		nc, err := nats.Connect(srv.URL())
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(nc.Close)
		n, err := transport.NewNATS(nc)
		if err != nil {
			tb.Fatal(err)
		}
		return n
	}
}

// BenchmarkTopology measures env steps/s of the whole topology (2 env
// workers × 4 CartPoles, 2 policy workers running the fake linear policy,
// the fake learner) on the in-process streams and on NATS loopback. The
// policy and learner are near no-ops, so this is the framework's cost.
func BenchmarkTopology(b *testing.B) {
	for _, name := range []string{"inproc", "nats"} {
		b.Run(name, func(b *testing.B) {
			var mk func() transport.Transport
			var wire func() map[string]uint64 // bytes by kind, NATS only
			if name == "inproc" {
				ip := transport.NewInproc()
				mk = func() transport.Transport { return ip }
			} else {
				srv, err := transport.StartServer(transport.ServerOptions{})
				if err != nil {
					b.Fatal(err)
				}
				defer srv.Shutdown()
				// One connection per kind, each counting its own bytes.
				conns := map[string][]*nats.Conn{}
				defer func() {
					for _, cs := range conns {
						for _, c := range cs {
							c.Close()
						}
					}
				}()
				dial := func(kind string) transport.Transport {
					nc, err := nats.Connect(srv.URL())
					if err != nil {
						b.Fatal(err)
					}
					conns[kind] = append(conns[kind], nc)
					n, err := transport.NewNATS(nc)
					if err != nil {
						b.Fatal(err)
					}
					return n
				}
				mk = func() transport.Transport {
					return transport.SplitTransport(dial(transport.KindInference), dial(transport.KindSamples), dial(transport.KindParams), dial(transport.KindMembership))
				}
				wire = func() map[string]uint64 {
					m := map[string]uint64{}
					for k, cs := range conns {
						for _, c := range cs {
							st := c.Stats()
							m[k] += st.InBytes + st.OutBytes
						}
					}
					return m
				}
			}
			steps := benchTopology(b, mk, benchShape{policyWorkers: 2, perWorker: 4, pieces: algotest.Pieces(),
				newEnv: func() (env.Env, error) { return env.Make("CartPole-v1", env.WithEpisodeStatistics()) }})
			if wire != nil {
				// Client-side counters (payload + headers, sent and
				// received), so each message counts at both its ends, as
				// herd launch's server-side figure counts it.
				total := uint64(0)
				for _, k := range []string{transport.KindInference, transport.KindSamples, transport.KindParams} {
					n := wire()[k]
					total += n
					b.ReportMetric(float64(n)/float64(steps), k+"-B/step")
				}
				b.ReportMetric(float64(total)/float64(steps), "wire-B/step")
			}
		})
	}
}

// benchShape is a benchmark topology: policy workers, env workers of
// perWorker envs each, the pieces, and whether env workers open a
// parameter service (run/distexec's do not: on NATS it would download
// every version).
type benchShape struct {
	policyWorkers, perWorker int
	pieces                   *algo.Pieces
	newEnv                   func() (env.Env, error)
	envParams                bool
	metrics                  bool // the workers' Prometheus metrics on
}

// benchTopology runs the policy workers, 2 env workers and the learner of
// sh over transports from mk for about b.N env steps, reports env-steps/s
// and returns the env steps taken.
func benchTopology(b *testing.B, mk func() transport.Transport, sh benchShape) int {
	const T = 32
	iters := max(1, b.N/(T*sh.perWorker))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	opt := transport.Options{ObsDim: 4, OutDim: 2, Like: algotest.NewParams(), Capacity: 2}
	var closers []func() error
	defer func() {
		for _, c := range closers {
			_ = c()
		}
	}()
	open := func(params bool) (transport.InferenceStream, transport.SampleStream, transport.ParamService) {
		tr := mk()
		inf, _ := tr.Inference(ctx, "bench", opt)
		s, _ := tr.Samples(ctx, "bench", opt)
		closers = append(closers, inf.Close, s.Close)
		if !params {
			return inf, s, nil
		}
		p, _ := tr.Params(ctx, "bench", opt)
		closers = append(closers, p.Close)
		return inf, s, p
	}
	var wg sync.WaitGroup
	for range sh.policyWorkers {
		inf, _, p := open(true)
		var pm *PolicyMetrics
		if sh.metrics {
			var err error
			if pm, err = NewPolicyMetrics(prometheus.NewRegistry()); err != nil {
				b.Fatal(err)
			}
		}
		wg.Go(func() { _ = RunPolicyWith(ctx, PolicyConfig{Metrics: pm}, sh.pieces, inf, p) })
	}
	for slot := range 2 {
		inf, s, _ := open(sh.envParams)
		envs := make([]env.Env, sh.perWorker)
		for j := range envs {
			e, err := sh.newEnv()
			if err != nil {
				b.Fatal(err)
			}
			envs[j] = e
			defer e.Close()
		}
		var em *EnvMetrics
		if sh.metrics {
			var err error
			if em, err = NewEnvMetrics(prometheus.NewRegistry()); err != nil {
				b.Fatal(err)
			}
		}
		wg.Go(func() {
			_ = RunEnv(ctx, EnvConfig{Slot: slot, Seed: 1, Envs: envs, Steps: T, Gamma: 0.99, Metrics: em}, sh.pieces, inf, s)
		})
	}
	_, s, p := open(true)
	b.ResetTimer()
	if _, err := RunLearner(ctx, LearnerConfig{Iterations: iters}, sh.pieces, s, p); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64(iters*T*sh.perWorker)/b.Elapsed().Seconds(), "env-steps/s")
	cancel()
	wg.Wait()
	return iters * T * sh.perWorker
}

// endWorkers stops the workers of a topology test, waits for them and
// reports their errors, then the learner's (learnerErr).
func endWorkers(t *testing.T, stop context.CancelFunc, wg *sync.WaitGroup, errs chan error, learnerErr error) {
	t.Helper()
	stop()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if learnerErr != nil {
		t.Fatal(learnerErr)
	}
}
