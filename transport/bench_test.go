package transport

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	herdv1 "herd/proto/herd/v1"
	"herd/sample"
)

// benchWorlds runs f on the in-process twin and on an embedded NATS server
// on loopback, alternating in one command so the ratio survives a loaded
// machine.
func benchWorlds(b *testing.B, f func(b *testing.B, tr func() Transport)) {
	b.Run("inproc", func(b *testing.B) {
		ip := NewInproc()
		f(b, func() Transport { return ip })
	})
	b.Run("nats", func(b *testing.B) {
		srv, err := StartServer(ServerOptions{})
		if err != nil {
			b.Fatal(err)
		}
		defer srv.Shutdown()
		var conns []*nats.Conn
		defer func() {
			for _, nc := range conns {
				nc.Close()
			}
		}()
		f(b, func() Transport {
			nc, err := nats.Connect(srv.URL())
			if err != nil {
				b.Fatal(err)
			}
			conns = append(conns, nc)
			n, err := NewNATS(nc)
			if err != nil {
				b.Fatal(err)
			}
			return n
		})
	})
}

// BenchmarkInferLatency measures request-reply latency with C env workers
// each asking for one CartPole observation (obs dim 4, out dim 3: two logits
// and a value) from one policy worker running a no-op policy; the policy
// worker's batch grows with C. Reports p50/p99 latency and the mean batch.
func BenchmarkInferLatency(b *testing.B) {
	opt := Options{ObsDim: 4, OutDim: 3}
	for _, clients := range []int{1, 4, 16, 64} {
		b.Run("clients="+strconv.Itoa(clients), func(b *testing.B) {
			benchWorlds(b, func(b *testing.B, tr func() Transport) {
				ctx := context.Background()
				srv, err := tr().Inference(ctx, "bench", opt)
				if err != nil {
					b.Fatal(err)
				}
				var batches, reqs int64
				sctx, stop := context.WithCancel(ctx)
				done := make(chan struct{})
				go func() {
					defer close(done)
					_ = srv.Serve(sctx, func(_ context.Context, batch []*InferRequest) error {
						batches++
						reqs += int64(len(batch))
						return nil
					})
				}()
				cli, err := tr().Inference(ctx, "bench", opt)
				if err != nil {
					b.Fatal(err)
				}
				lat := make([][]time.Duration, clients)
				b.ResetTimer()
				var wg sync.WaitGroup
				per := max(1, b.N/clients)
				for c := range clients {
					wg.Go(func() {
						r := &InferRequest{Worker: c, Rows: 1, Obs: make([]float32, 4)}
						l := make([]time.Duration, 0, per)
						for range per {
							t0 := time.Now()
							if err := cli.Infer(ctx, r); err != nil {
								b.Error(err)
								return
							}
							l = append(l, time.Since(t0))
						}
						lat[c] = l
					})
				}
				wg.Wait()
				b.StopTimer()
				stop()
				<-done
				_ = cli.Close()
				_ = srv.Close()
				all := slices.Concat(lat...)
				slices.Sort(all)
				if len(all) > 0 {
					b.ReportMetric(float64(all[len(all)/2])/1e3, "p50-µs")
					b.ReportMetric(float64(all[len(all)*99/100])/1e3, "p99-µs")
				}
				if batches > 0 {
					b.ReportMetric(float64(reqs)/float64(batches), "reqs/batch")
				}
			})
		})
	}
}

// BenchmarkSamplePush measures pushing CartPole samples from 2 env workers
// to one learner: on-policy segments (128 steps × 8 envs) and off-policy
// transitions (256 per push). Reports env steps/s and wire bytes per env
// step (the protobuf envelope around package sample's encoding).
func BenchmarkSamplePush(b *testing.B) {
	seg := sample.NewSegment(128, 8, 4, 1)
	tr := sample.NewTransitions(256, 4, 1)
	tr.Priorities = make([]float32, 256)
	for _, c := range []struct {
		name  string
		steps int
		enc   func() ([]byte, error)
	}{
		{"segment-128x8", 128 * 8, func() ([]byte, error) { return seg.AppendEncode(nil) }},
		{"transitions-256", 256, func() ([]byte, error) { return tr.AppendEncode(nil) }},
	} {
		payload, err := c.enc()
		if err != nil {
			b.Fatal(err)
		}
		wire, err := proto.Marshal(&herdv1.SamplePush{Protocol: Protocol, Worker: 1, Sample: payload})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			benchWorlds(b, func(b *testing.B, tr func() Transport) {
				ctx := context.Background()
				learner, err := tr().Samples(ctx, "bench", Options{Capacity: 4})
				if err != nil {
					b.Fatal(err)
				}
				lctx, stop := context.WithCancel(ctx)
				pulled := make(chan int)
				go func() {
					n := 0
					for {
						if _, err := learner.Pull(lctx); err != nil {
							pulled <- n
							return
						}
						n++
					}
				}()
				b.SetBytes(int64(len(wire)))
				b.ResetTimer()
				var wg sync.WaitGroup
				for w := range 2 {
					p, err := tr().Samples(ctx, "bench", Options{})
					if err != nil {
						b.Fatal(err)
					}
					wg.Go(func() {
						for i := w; i < b.N; i += 2 {
							// Each push owns its bytes (the in-process stream
							// hands them over), so copy as an env worker would
							// encode a fresh sample.
							if err := p.Push(ctx, SampleID{Slot: w}, slices.Clone(payload)); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
				b.StopTimer()
				stop()
				<-pulled
				_ = learner.Close()
				b.ReportMetric(float64(b.N*c.steps)/b.Elapsed().Seconds(), "env-steps/s")
				b.ReportMetric(float64(len(wire))/float64(c.steps), "wire-B/step")
			})
		})
	}
}
