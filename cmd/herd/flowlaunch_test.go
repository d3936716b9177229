package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// herd launch runs a flow plan with its env workers as processes serving
// the plan's actors over the embedded NATS server, and the learner process
// driving the plan: synchronous DQN and asynchronous Ape-X.
func TestLaunchFlow(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	for _, cfg := range []string{"dqn-cartpole-flow.yaml", "apex-cartpole-flow.yaml"} {
		t.Run(cfg, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			out := filepath.Join(t.TempDir(), "run")
			stdout, stderr, err := launchCmd(t, ctx, "--config", filepath.Join("..", "..", "configs", cfg),
				"--steps", "6000", "--out", out, "--quiet")
			if err != nil {
				t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
			}
			if !strings.Contains(stdout, "serving the plan's actors, 0 policy workers") {
				t.Errorf("stdout does not report the flow topology:\n%s", stdout)
			}
			s := readSummary(t, out)
			if s["steps"].(float64) != 6000 {
				t.Errorf("summary steps %v", s["steps"])
			}
			d, _ := s["dist"].(map[string]any)
			if d["dist/duplicates"] != 0.0 || d["dist/decode_errors"] != 0.0 {
				t.Errorf("summary dist %v, want 0 duplicates and decode errors", d)
			}
		})
	}
}

// A flow config without env_workers is refused before any process starts
// (the plan's default differs by algorithm).
func TestLaunchFlowNeedsEnvWorkers(t *testing.T) {
	p := filepath.Join(t.TempDir(), "dqn.yaml")
	if err := os.WriteFile(p, []byte("algo: dqn\nenv: CartPole-v1\nsteps: 1000\nruntime: {executor: flow}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _, err := launchCmd(t, ctx, "--config", p, "--out", filepath.Join(t.TempDir(), "run"))
	if err == nil || !strings.Contains(err.Error(), "env_workers") {
		t.Fatalf("launch without env_workers: %v", err)
	}
}
