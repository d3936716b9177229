package worker_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"herd/algo"
	"herd/env"
	"herd/internal/rng"
	"herd/rollout"
	"herd/sample"
	"herd/transport"
	"herd/worker"
)

// lstmPieces are PPO-LSTM's pieces on CartPoleNoVel-v1, small, and the
// inference stream's options: each row carries the env's state (obs + sd
// in, outputs + sd out), as the dist executor sets them.
func lstmPieces(t *testing.T) (*algo.Pieces, transport.Options, int) {
	t.Helper()
	pieces, p := piecesOf(t, "algo: ppo\nenv: CartPoleNoVel-v1\nseed: 3\nsteps: 1024\nruntime: {executor: dist}\n"+
		"ppo: {num_envs: 4, num_steps: 16, num_minibatches: 1, hidden: [8], recurrent: {type: lstm, hidden: 8}}\n")
	sd := p.(algo.StatefulPolicy).StateDim()
	if sd != 4*8 {
		t.Fatalf("state of %d per env, want 32 (h and c of two LSTMs of 8)", sd)
	}
	return pieces, transport.Options{ObsDim: 4 + sd, OutDim: p.OutDim() + sd}, sd
}

// lstmEnvs are 4 CartPoleNoVel envs cut at 9 steps, so that segments hold
// episode ends and truncation bootstraps from an env's state.
func lstmEnvs(t *testing.T) []env.Env {
	t.Helper()
	envs := make([]env.Env, 4)
	for j := range envs {
		e, err := env.Make("CartPoleNoVel-v1", env.WithEpisodeStatistics(), env.WithMaxEpisodeSteps(9))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		envs[j] = e
	}
	return envs
}

const lstmSlot, lstmSeed, lstmSegs = 1, 5, 3

// lstmSegments runs one env worker of PPO-LSTM for lstmSegs segments with
// the learner's initial weights — served by pw policy workers with g env
// groups, or inline (g = 0) — and returns the encoded segments it pushed.
// With lose, every third reply is lost after a policy worker answered, and
// the env worker asks again.
func lstmSegments(t *testing.T, g, pw int, lose bool) [][]byte {
	t.Helper()
	pieces, opt, _ := lstmPieces(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ip := transport.NewInproc()
	run := fmt.Sprintf("lstm-%d", g)
	params := initialParams(ctx, t, ip, run, opt, pieces)
	smp := &collect{}
	cfg := worker.EnvConfig{Slot: lstmSlot, Seed: lstmSeed, Envs: lstmEnvs(t), Steps: 16, Gamma: 0.99, Segments: lstmSegs, Groups: g,
		Timeouts: worker.Timeouts{Weights: 20 * time.Millisecond}}
	if g == 0 {
		if err := worker.RunEnvInline(ctx, cfg, pieces, params, smp); err != nil {
			t.Fatal(err)
		}
		return smp.got
	}
	inf, err := ip.Inference(ctx, run, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer inf.Close()
	pctx, stopPolicy := context.WithCancel(ctx)
	policyDone := make(chan error, pw)
	for range pw {
		go func() { policyDone <- worker.RunPolicy(pctx, pieces, inf, params) }()
	}
	defer func() {
		stopPolicy()
		for range pw {
			<-policyDone
		}
	}()
	var ask transport.InferenceStream = inf
	lossy := &lossyInference{InferenceStream: inf}
	if lose {
		ask = lossy
	}
	if err := worker.RunEnv(ctx, cfg, pieces, ask, smp); err != nil {
		t.Fatal(err)
	}
	if lose && lossy.lost == 0 {
		t.Fatal("no reply was lost")
	}
	return smp.got
}

// lossyInference loses every third reply: the request was answered, and
// the asker gets an error instead (a policy worker that died after its
// forward pass, a reply dropped on the wire).
type lossyInference struct {
	transport.InferenceStream
	calls, lost int
}

func (l *lossyInference) Infer(ctx context.Context, r *transport.InferRequest) error {
	if err := l.InferenceStream.Infer(ctx, r); err != nil {
		return err
	}
	l.calls++
	if l.calls%3 == 0 {
		l.lost++
		return errors.New("reply lost")
	}
	return nil
}

// lstmLocal runs the local executor's loop (rollout.Segments with a policy
// that keeps the states itself, rollout.Inline) on the env worker's envs,
// env seeds and action stream, and returns its segments, encoded.
func lstmLocal(t *testing.T) [][]byte {
	t.Helper()
	pieces, _, _ := lstmPieces(t)
	net, err := pieces.NewPolicy()
	if err != nil {
		t.Fatal(err)
	}
	envs := lstmEnvs(t)
	s, err := pieces.NewSampler(len(envs), rng.New(lstmSeed, "env-worker", lstmSlot))
	if err != nil {
		t.Fatal(err)
	}
	obs := make([]float32, 0, 4*len(envs))
	for j, e := range envs {
		o, _, err := e.Reset(int64(rng.Derive(lstmSeed, "dist/env", lstmSlot*len(envs)+j) >> 1))
		if err != nil {
			t.Fatal(err)
		}
		obs = append(obs, o...)
	}
	v, err := env.NewSyncVectorOf(envs)
	if err != nil {
		t.Fatal(err)
	}
	loop := rollout.NewSegments(lstmSlot, v, rollout.NewInline(net, s), 0.99)
	loop.Start(obs)
	var out [][]byte
	for range lstmSegs {
		seg := sample.NewSegment(16, len(envs), 4, 1)
		seg.Versions = make([]uint64, 16)
		if err := loop.Collect(seg); err != nil {
			t.Fatal(err)
		}
		b, err := seg.AppendEncode(nil)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// With the weights of one version, PPO-LSTM's env worker pushes, bit for
// bit, the segments of the local loop — actions, log-probabilities,
// values, truncation bootstraps from each env's state, dones, and the
// states each segment starts from — whether a policy worker answers (one
// env group or two), two policy workers share the requests (so a request
// may go to either, as after a restart), or an inline copy answers: the
// states travel with the requests, and the network's rows do not depend
// on who runs it. A reply lost after a policy worker answered is asked
// for again with the same state, so the env's state advances once.
func TestRecurrentSegmentsMatchLocal(t *testing.T) {
	want := lstmLocal(t)
	_, _, sd := lstmPieces(t)
	var truncated bool
	for i, b := range want {
		seg, err := sample.DecodeSegment(b)
		if err != nil {
			t.Fatal(err)
		}
		if len(seg.State) != seg.N*sd {
			t.Fatalf("local segment %d has %d state values, want %d", i, len(seg.State), seg.N*sd)
		}
		nonzero := false
		for _, x := range seg.State {
			nonzero = nonzero || x != 0
		}
		if i > 0 && !nonzero {
			t.Errorf("local segment %d starts from the zero state", i)
		}
		for _, e := range seg.Episodes {
			truncated = truncated || e.Length == 9
		}
	}
	if !truncated {
		t.Fatal("no episode was truncated: the bootstraps from the env's state are not tested")
	}
	for _, c := range []struct {
		name  string
		g, pw int
		lose  bool
	}{{"policy worker", 1, 1, false}, {"policy worker, 2 env groups", 2, 1, false}, {"2 policy workers, 4 env groups", 4, 2, false},
		{"2 policy workers, replies lost", 1, 2, true}, {"inline", 0, 0, false}} {
		got := lstmSegments(t, c.g, c.pw, c.lose)
		if len(got) != len(want) {
			t.Fatalf("%s: %d segments, want %d", c.name, len(got), len(want))
		}
		for i := range got {
			if !bytes.Equal(got[i], want[i]) {
				t.Errorf("%s: segment %d differs from the local loop's", c.name, i)
			}
		}
	}
}
