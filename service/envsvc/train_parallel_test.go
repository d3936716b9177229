package envsvc

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"herd/algo"
	"herd/algo/all"
	"herd/internal/pyproc"
	"herd/run/hts"
)

// trainParams trains configs/ippo-simple-spread.yaml on envID for two PPO
// updates (local executor, or HTS) and returns its parameters.
func trainParams(t *testing.T, envID string, useHTS bool) []float32 {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(pyproc.Root(), "configs", "ippo-simple-spread.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := algo.Resolve(data, all.Specs(), algo.Overrides{Env: &envID})
	if err != nil {
		t.Fatal(err)
	}
	h := res.Header
	n, T, _ := res.Config.(hts.Shape).RolloutShape()
	h.Steps = int64(2 * n * T)
	rt := &algo.Runtime{Header: h, Log: algo.Discard()}
	var m algo.Model
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
		want := trainParams(t, id, useHTS)
		got := trainParams(t, "grpc://"+addr+"/"+id, useHTS)
		if len(want) == 0 || len(want) != len(got) {
			t.Fatalf("hts %v: %d and %d parameters", useHTS, len(want), len(got))
		}
		for i := range want {
			if want[i] != got[i] {
				t.Fatalf("hts %v: parameter %d: local %v, remote %v", useHTS, i, want[i], got[i])
			}
		}
	}
}
