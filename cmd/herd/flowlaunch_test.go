package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"herd/launch"
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
			// The plan's calls carry its weights and segments: reported as
			// actor calls, not as inference.
			kinds, _ := s["wire_by_kind"].(map[string]any)
			calls, _ := kinds["actor_calls"].(map[string]any)
			if b, _ := calls["bytes"].(float64); b == 0 || kinds["inference"] != nil {
				t.Errorf("wire_by_kind %v: want the plan's bytes under actor_calls and no inference", kinds)
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

// kill -9 of a flow plan's env worker mid-run under herd launch: the
// supervisor starts the process again, the driver rejoins the new start
// (its init call, the current weights, then the call lost with the old
// one) and the run completes every step of its budget with exit 0: one
// restart, one call reissued, no duplicates. A synchronous plan (PPO,
// GatherSync) and an asynchronous one (IMPALA, GatherAsync).
func TestLaunchFlowRestartsKilledWorker(t *testing.T) {
	for _, c := range []struct {
		cfg   string
		steps float64 // 100000 in whole rounds (PPO: 4 × 128) or segments (IMPALA: 4 × 5)
	}{
		{"ppo-cartpole-flow.yaml", 99840},
		{"impala-cartpole.yaml", 100000},
	} {
		t.Run(c.cfg, func(t *testing.T) {
			out, r := killFlowWorker(t, c.cfg, "flowkill")
			if r.err != nil {
				t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", r.err, r.stdout, r.stderr)
			}
			if n := strings.Count(r.stderr, "env worker 0 exited"); n != 1 {
				t.Errorf("launch reported %d restarts of env worker 0, want 1; stderr:\n%s", n, r.stderr)
			}
			if !strings.Contains(r.stdout, "workers rejoined after a restart 1, calls reissued 1") {
				t.Errorf("the learner does not report the rejoin:\n%s", r.stdout)
			}
			s := readSummary(t, out)
			if s["steps"].(float64) != c.steps || s["status"] != "completed" {
				t.Errorf("summary: %v steps, status %v; want %v, completed", s["steps"], s["status"], c.steps)
			}
			d, _ := s["dist"].(map[string]any)
			for name, want := range map[string]float64{"dist/restarts": 1, "dist/reissued": 1, "dist/duplicates": 0, "dist/decode_errors": 0} {
				if d[name] != want {
					t.Errorf("summary %s = %v, want %v (dist: %v)", name, d[name], want, d)
				}
			}
		})
	}
}

// With the restart budget spent (--max-restarts 0), the kill ends the run
// with an error naming the worker, and exit status 1.
func TestLaunchFlowRestartBudgetSpent(t *testing.T) {
	_, r := killFlowWorker(t, "ppo-cartpole-flow.yaml", "flowbudget", "--max-restarts", "0")
	if r.err == nil || launch.ExitStatus(r.err) != launch.ExitFailed || !strings.Contains(r.err.Error(), "env worker 0 failed 1 times") {
		t.Fatalf("launch: %v (exit status %d), want env worker 0's failure and exit status 1\nstderr:\n%s", r.err, launch.ExitStatus(r.err), r.stderr)
	}
}

// killFlowWorker launches cfg (100000 steps) as run, kill -9s env worker
// 0 once the learner has written its first metrics row (the driver has
// built its workers and trains), and returns the run directory and what
// launch returned. The TTL is long enough that no keep-alive misses it on
// a loaded machine (a worker that takes its controller for gone exits and
// is restarted too); the driver notices the new process by its
// registration, not by the old one's expiry.
func killFlowWorker(t *testing.T, cfg, run string, args ...string) (string, launchResult) {
	t.Helper()
	srv, ctx := natsRun(t, 240*time.Second)
	out := filepath.Join(t.TempDir(), "run")
	done := launchAsync(t, ctx, append([]string{"--config", filepath.Join("..", "..", "configs", cfg), "--steps", "100000",
		"--out", out, "--quiet", "--nats", srv.URL(), "--run", run, "--ttl", "5s"}, args...)...)
	mem := watchRun(t, ctx, srv.URL(), run)
	pid := awaitPIDs(t, ctx, mem, done, "env-0")["env-0"]
	waitFor(t, "training to start", training(out))
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	return out, <-done
}
