package worker

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"herd/dist"
	"herd/env"
	"herd/internal/fakealgo"
	"herd/sample"
	"herd/weights"
)

// TestSlowLearnerLearnsEachSegmentOnce reproduces a push whose wait runs
// out while the sample still waits at the learner: the env worker retries
// it, and the learner must queue it once. The learner here pulls every
// 300 ms with a queue of 1 and the env worker's push timeout is 100 ms,
// so every push is retried several times while its first send is pending.
func TestSlowLearnerLearnsEachSegmentOnce(t *testing.T) {
	srv, err := dist.StartServer(dist.ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	opt := dist.Options{ObsDim: 4, OutDim: 2, Like: fakealgo.NewParams(), Capacity: 1}
	open := func() (dist.InferenceStream, dist.SampleStream, dist.ParamService) {
		nc, err := nats.Connect(srv.URL())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		n, err := dist.NewNATS(nc)
		if err != nil {
			t.Fatal(err)
		}
		inf, _ := n.Inference(ctx, "once", opt)
		s, _ := n.Samples(ctx, "once", opt)
		p, err := n.Params(ctx, "once", opt)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = inf.Close(); _ = s.Close(); _ = p.Close() })
		return inf, s, p
	}
	pieces := fakealgo.Pieces()
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	inf, _, p := open()
	wg.Go(func() { _ = RunPolicy(wctx, pieces, inf, p) })
	inf2, s2, _ := open()
	e, err := env.Make("CartPole-v1", env.WithEpisodeStatistics())
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	wg.Go(func() {
		_ = RunEnv(wctx, EnvConfig{Slot: 0, Seed: 1, Envs: []env.Env{e}, Steps: 8, Gamma: 0.99,
			Timeouts: Timeouts{Push: 100 * time.Millisecond}}, pieces, inf2, s2)
	})
	_, learner, lp := open()
	if err := lp.Publish(ctx, weights.New(0, fakealgo.NewParams())); err != nil {
		t.Fatal(err)
	}
	var got [][]byte
	for range 6 {
		if err := sleepCtx(ctx, 300*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		b, err := learner.Pull(ctx)
		if err != nil {
			t.Fatal(err)
		}
		seg, err := sample.DecodeSegment(b)
		if err != nil {
			t.Fatal(err)
		}
		for i, g := range got {
			if bytes.Equal(g, b) {
				t.Errorf("pull %d repeats pull %d (segment of worker %d, version %d)", len(got), i, seg.Worker, seg.Version)
			}
		}
		got = append(got, b)
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
