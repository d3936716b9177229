package envsvc

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"herd/algo"
	"herd/algo/all"
	"herd/internal/pyproc"
	"herd/run"
	"herd/run/hts"
)

// resolveConfig resolves configs/CONFIG with its env set to envID.
func resolveConfig(tb testing.TB, config, envID string) *algo.Resolved {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join(pyproc.Root(), "configs", config))
	if err != nil {
		tb.Fatal(err)
	}
	res, err := algo.Resolve(data, all.Specs(), algo.Overrides{Envs: envs(), Env: &envID})
	if err != nil {
		tb.Fatal(err)
	}
	return res
}

// trainParams trains configs/ippo-simple-spread.yaml on envID for two PPO
// updates (local executor, or HTS) and returns its parameters.
func trainParams(t *testing.T, config, envID string, useHTS bool) []float32 {
	t.Helper()
	res := resolveConfig(t, config, envID)
	h := res.Header
	n, T, _ := res.Config.(algo.Rollout).RolloutShape()
	h.Steps = int64(2 * n * T)
	rt := &algo.Runtime{Header: h, Log: algo.Discard()}
	var m algo.Model
	var err error
	if useHTS {
		m, err = hts.Train(context.Background(), rt, res.Spec, res.Config, hts.OptionsOf(h))
	} else {
		m, err = res.Spec.Train(context.Background(), rt, res.Config)
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []float32
	for _, p := range m.(algo.ParamModel).Params() {
		out = append(out, p.Value...)
	}
	return out
}

// TestTrainRemoteSimpleSpread: IPPO trained on simple_spread served by
// herd serve env's server ends with the same parameters, bit for bit, as
// on the local env, under the local executor and under HTS (whose slots
// each open their own multi-agent session).
func TestTrainRemoteSimpleSpread(t *testing.T) {
	if testing.Short() {
		t.Skip("trains PPO for two updates four times")
	}
	addr, _ := startServerWith(t, nil, 0, Config{MaxEnvs: 64, MaxSessions: 64}) // HTS: a session per slot
	const id = "mpe/simple_spread_v3?agent_id=true"
	for _, useHTS := range []bool{false, true} {
		sameParams(t, fmt.Sprintf("hts %v", useHTS), trainParams(t, "ippo-simple-spread.yaml", id, useHTS),
			trainParams(t, "ippo-simple-spread.yaml", "grpc://"+addr+"/"+id, useHTS))
	}
}

func sameParams(t *testing.T, what string, want, got []float32) {
	t.Helper()
	if len(want) == 0 {
		t.Fatalf("%s: no parameters", what)
	}
	sameSlice(t, what, want, got)
}

// TestTrainRemoteInflight: a run's env id may split its vector over
// sessions (?inflight=K): herd train's path (algo.TrainRun, which also
// makes single envs of the id) on PPO CartPole through herd serve env's
// server with inflight=2 writes the local run's tensors.
func TestTrainRemoteInflight(t *testing.T) {
	addr, _ := startServer(t, nil, 0)
	tensors := func(id string) []byte {
		t.Helper()
		res := resolveConfig(t, "ppo-cartpole.yaml", id)
		n, T, _ := res.Config.(algo.Rollout).RolloutShape()
		res.Header.Steps, res.Header.Out = int64(2*n*T), t.TempDir()
		if _, err := algo.TrainRun(context.Background(), res, algo.RunOptions{Executors: run.Executors()}); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		b, err := os.ReadFile(filepath.Join(res.Header.Out, "model.safetensors"))
		if err != nil || len(b) < 8 {
			t.Fatalf("%s: model: %v", id, err)
		}
		// the tensors after the JSON header, which names the env
		return b[8+binary.LittleEndian.Uint64(b):]
	}
	if want, got := tensors("CartPole-v1"), tensors("grpc://"+addr+"/CartPole-v1?inflight=2"); !bytes.Equal(want, got) {
		t.Fatalf("inflight=2: tensors differ from the local run's (%d and %d bytes)", len(want), len(got))
	}
}
