package run_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"herd/algo"
	"herd/algo/all"
	"herd/internal/pyproc"
	"herd/run"
)

// TestEvalMixedActionSpaces: a run of configs/ppo-signal-policies.yaml
// (its agents have different action spaces, a policy each) passes
// Eval's checkpoint check, loads and evaluates, as herd eval does.
func TestEvalMixedActionSpaces(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(pyproc.Root(), "configs", "ppo-signal-policies.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	steps := int64(4096)
	res, err := algo.Resolve(data, all.Specs(), algo.Overrides{Steps: &steps})
	if err != nil {
		t.Fatal(err)
	}
	res.Header.Out = t.TempDir()
	if _, err := algo.TrainRun(context.Background(), res, algo.RunOptions{Dir: algo.DirForce, Executors: run.Executors()}); err != nil {
		t.Fatal(err)
	}
	var out, notes bytes.Buffer
	if err := run.Eval(context.Background(), &out, &notes, run.EvalOptions{Dir: res.Header.Out, Episodes: 3, Specs: all.Specs()}); err != nil {
		t.Fatalf("eval: %v (notes %s)", err, notes.String())
	}
	if !strings.Contains(out.String(), "speaker_0") || !strings.Contains(out.String(), "listener_0") {
		t.Errorf("eval printed %q, want each agent's return", out.String())
	}
}
