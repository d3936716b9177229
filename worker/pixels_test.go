package worker_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"herd/env"
	"herd/sample"
	"herd/transport"
	"herd/worker"
)

// TestMinAtarNATSMatchesInproc: an env worker on MinAtar (10×10×4 binary
// planes, the minatar encoder) whose policy worker answers over NATS,
// where each observation row travels as 50 bytes of bits, pushes the same
// segments, bit for bit, as over the in-process stream, where nothing is
// encoded; and its stream counts those bytes.
func TestMinAtarNATSMatchesInproc(t *testing.T) {
	const segs, T, N, dim = 2, 8, 2, 400
	pieces, p := piecesOf(t, "algo: ppo\nenv: MinAtar/Breakout-v1\nseed: 3\nsteps: 1024\nruntime: {executor: dist}\nppo: {encoder: minatar, hidden: [16], num_envs: 2, num_steps: 8}\n")
	opt := transport.Options{ObsDim: dim, OutDim: p.OutDim()}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	srv, err := transport.StartServer(transport.ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	dial := func() transport.Transport {
		nc, err := nats.Connect(srv.URL())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		n, err := transport.NewNATS(nc)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	ip := transport.NewInproc()
	params := initialParams(ctx, t, ip, "pixels", opt, pieces) // one fixed version for both runs
	run := func(policySide, envSide transport.Transport) ([][]byte, transport.Stats) {
		t.Helper()
		serve, err := policySide.Inference(ctx, "pixels", opt)
		if err != nil {
			t.Fatal(err)
		}
		defer serve.Close()
		ask, err := envSide.Inference(ctx, "pixels", opt)
		if err != nil {
			t.Fatal(err)
		}
		defer ask.Close()
		pctx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- worker.RunPolicy(pctx, pieces, serve, params) }()
		defer func() { stop(); <-done }()
		envs := make([]env.Env, N)
		for j := range envs {
			e, err := env.Make("MinAtar/Breakout-v1", env.WithEpisodeStatistics())
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			envs[j] = e
		}
		smp := &collect{}
		cfg := worker.EnvConfig{Slot: 1, Seed: 5, Envs: envs, Steps: T, Gamma: 0.99, Segments: segs}
		if err := worker.RunEnv(ctx, cfg, pieces, ask, smp); err != nil {
			t.Fatal(err)
		}
		return smp.got, ask.Stats()
	}
	want, _ := run(ip, ip)
	got, st := run(dial(), dial())
	if len(want) != segs || len(got) != segs {
		t.Fatalf("pushed %d and %d segments, want %d", len(want), len(got), segs)
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("segment %d over NATS differs from in process", i)
		}
	}
	seg, err := sample.DecodeSegment(want[0])
	if err != nil {
		t.Fatal(err)
	}
	if sample.EncodingOf(seg.Obs) != sample.ObsBits {
		t.Fatal("MinAtar's observations are not binary: the test checks nothing packed")
	}
	// One row per env step and one bootstrap row per env and segment.
	if rows := uint64(segs * N * (T + 1)); st.ObsBytes != rows*dim/8 {
		t.Errorf("NATS stream counted %d observation bytes, want %d (%d rows of %d bits)", st.ObsBytes, rows*dim/8, rows, dim)
	}
}
