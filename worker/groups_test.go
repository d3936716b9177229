package worker_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"herd/algo"
	"herd/algo/all"
	"herd/env"
	"herd/transport"
	"herd/worker"
)

// ppoPieces builds PPO's pieces for CartPole with 4 envs per worker.
func ppoPieces(t *testing.T) (*algo.Pieces, transport.Options) {
	t.Helper()
	pieces, p := piecesOf(t, "algo: ppo\nenv: CartPole-v1\nseed: 3\nsteps: 1024\nruntime: {executor: dist}\nppo: {num_envs: 4, num_steps: 64, hidden: [16, 16]}\n")
	return pieces, transport.Options{ObsDim: 4, OutDim: p.OutDim()}
}

// piecesOf builds the pieces of the run config file and a policy of them.
func piecesOf(t *testing.T, file string) (*algo.Pieces, algo.PolicyNet) {
	t.Helper()
	res, err := algo.Resolve([]byte(file), all.Specs(), algo.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := env.Make(res.Header.Env)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	pieces, err := res.Spec.Pieces(res.Header, res.Config, algo.SpacesOf(e))
	if err != nil {
		t.Fatal(err)
	}
	p, err := pieces.NewPolicy()
	if err != nil {
		t.Fatal(err)
	}
	return pieces, p
}

// initialParams opens run's parameter service on ip and publishes the
// learner's initial weights (version 0), the only version it will hold.
func initialParams(ctx context.Context, t *testing.T, ip *transport.Inproc, run string, opt transport.Options, pieces *algo.Pieces) transport.ParamService {
	t.Helper()
	params, err := ip.Params(ctx, run, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { params.Close() })
	l, err := pieces.NewSegmentLearner()
	if err != nil {
		t.Fatal(err)
	}
	if err := params.Publish(ctx, l.Weights()); err != nil {
		t.Fatal(err)
	}
	return params
}

// segmentsWithGroups runs one env worker with g env groups for segs
// segments against a policy worker that never changes its weights (the
// synchronous case) and returns the encoded segments it pushed.
func segmentsWithGroups(t *testing.T, g, segs int) [][]byte {
	t.Helper()
	pieces, opt := ppoPieces(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ip := transport.NewInproc()
	run := fmt.Sprintf("groups-%d", g)
	inf, err := ip.Inference(ctx, run, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer inf.Close()
	params := initialParams(ctx, t, ip, run, opt, pieces)
	pctx, stopPolicy := context.WithCancel(ctx)
	policyDone := make(chan error, 1)
	go func() { policyDone <- worker.RunPolicy(pctx, pieces, inf, params) }()
	defer func() { stopPolicy(); <-policyDone }()

	envs := make([]env.Env, 4)
	for j := range envs {
		// Short episodes, so that truncation bootstraps happen too.
		e, err := env.Make("CartPole-v1", env.WithEpisodeStatistics(), env.WithMaxEpisodeSteps(9))
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		envs[j] = e
	}
	smp := &collect{}
	cfg := worker.EnvConfig{Slot: 1, Seed: 5, Envs: envs, Steps: 16, Gamma: 0.99, Segments: segs, Groups: g}
	if err := worker.RunEnv(ctx, cfg, pieces, inf, smp); err != nil {
		t.Fatal(err)
	}
	return smp.got
}

// collect is a sample stream that keeps what is pushed.
type collect struct{ got [][]byte }

func (c *collect) Push(_ context.Context, _ transport.SampleID, b []byte) error {
	c.got = append(c.got, b)
	return nil
}
func (c *collect) Pull(context.Context) ([]byte, error) { return nil, transport.ErrClosed }
func (c *collect) Stats() transport.Stats               { return transport.Stats{} }
func (c *collect) Close() error                         { return nil }

// With a fixed weights version, G = 2 and G = 4 env groups push exactly the
// segments of one group: observations, actions, log-probabilities, values,
// rewards (truncation bootstraps included), dones, episodes and versions.
func TestEnvGroupsMatchOneGroup(t *testing.T) {
	const segs = 3
	want := segmentsWithGroups(t, 1, segs)
	if len(want) != segs {
		t.Fatalf("G=1 pushed %d segments, want %d", len(want), segs)
	}
	for _, g := range []int{2, 4} {
		got := segmentsWithGroups(t, g, segs)
		if len(got) != segs {
			t.Fatalf("G=%d pushed %d segments, want %d", g, len(got), segs)
		}
		for i := range got {
			if !bytes.Equal(got[i], want[i]) {
				t.Errorf("G=%d: segment %d differs from G=1's", g, i)
			}
		}
	}
}

func TestCheckGroups(t *testing.T) {
	for _, c := range []struct {
		g, m int
		ok   bool
	}{{0, 4, true}, {1, 4, true}, {2, 4, true}, {4, 4, true}, {3, 4, false}, {8, 4, false}, {-1, 4, false}} {
		err := worker.CheckGroups(c.g, c.m)
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, worker.ErrGroups)) {
			t.Errorf("CheckGroups(%d, %d) = %v, want ok %v", c.g, c.m, err, c.ok)
		}
	}
}
