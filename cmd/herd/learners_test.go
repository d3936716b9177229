package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// writeLearnersConfig is PPO CartPole with 2 env workers and 2 learners,
// iters updates of both learners' segments.
func writeLearnersConfig(t *testing.T, iters int) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "ppo-learners.yaml")
	cfg := fmt.Sprintf("algo: ppo\nenv: CartPole-v1\nsteps: %d\nlog_every: 256\nruntime: {executor: dist, env_workers: 2, learners: 2}\n"+
		"ppo: {num_envs: 4, num_steps: 32, num_minibatches: 2, update_epochs: 1}\n", iters*2*4*32)
	if err := os.WriteFile(p, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// herd launch starts two learner processes that share every update and
// completes the run: learner 0 writes it with both learners' steps.
func TestLaunchTwoLearners(t *testing.T) {
	srv, ctx := natsRun(t, 120*time.Second)
	out := filepath.Join(t.TempDir(), "run")
	r := <-launchAsync(t, ctx, "--config", writeLearnersConfig(t, 8), "--out", out, "--quiet", "--nats", srv.URL(), "--run", "two-learners")
	if r.err != nil {
		t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", r.err, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "2 learners") {
		t.Errorf("stdout does not name 2 learners:\n%s", r.stdout)
	}
	if s := readSummary(t, out); s["steps"].(float64) != 8*2*4*32 {
		t.Errorf("summary steps %v", s["steps"])
	}
}

// kill -9 of learner 1 ends the run with an error that names it, soon
// (its registration is gone) rather than at the all-gather's deadline, and
// learner 0 writes the failed run's summary itself (the launcher leaves
// it); kill -9 of learner 0 ends it at once: the launcher does not start
// it again, since a learner group cannot resume, says so, and writes the
// summary the learner could not, with the steps of its last metrics row.
func TestLaunchDeadLearner(t *testing.T) {
	for _, c := range []struct {
		victim, want, cause string
		ownSummary          bool // learner 0 wrote summary.json
	}{
		{"learner-1", "learner-1 is gone", "learner-1 is gone", true},
		{"learner-0", "learner was killed (signal: killed); not started again, since the run cannot resume: ppo under executor dist: several data-parallel learners",
			"launch: learner was killed (signal: killed)", false},
	} {
		t.Run(c.victim, func(t *testing.T) {
			srv, ctx := natsRun(t, 120*time.Second)
			out := filepath.Join(t.TempDir(), "run")
			run := "dead-" + c.victim
			done := launchAsync(t, ctx, "--config", writeLearnersConfig(t, 5000), "--out", out, "--quiet", "--nats", srv.URL(), "--run", run, "--ttl", "1s")
			mem := watchRun(t, ctx, srv.URL(), run)
			pid := awaitPIDs(t, ctx, mem, done, "learner-1", "learner-0", "env-0", "env-1")[c.victim]
			// Mid-run: the learner has written a row (into its staging
			// directory, which the run's end puts in place).
			firstRow := awaitRow(t, ctx, filepath.Join(out, ".staging", "metrics.csv"))
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			t0 := time.Now()
			r := <-done
			if r.err == nil {
				t.Fatalf("the run completed without %s", c.victim)
			}
			if !strings.Contains(r.err.Error()+r.stderr, c.want) {
				t.Errorf("error %v does not say %q; stderr:\n%s", r.err, c.want, r.stderr)
			}
			if d := time.Since(t0); d > 30*time.Second {
				t.Errorf("the run ended %v after the kill, want a few TTLs", d)
			}
			t.Logf("run ended %v after the kill: %v", time.Since(t0), r.err)
			// The failure is on record in the run directory too, naming
			// its cause.
			s := readSummary(t, out)
			reason, _ := s["reason"].(string)
			if s["status"] != "failed" || !strings.Contains(reason, c.cause) {
				t.Errorf("summary status %v, reason %q; want failed, naming %q", s["status"], s["reason"], c.cause)
			}
			if byLauncher := strings.HasPrefix(reason, "launch: "); byLauncher == c.ownSummary {
				t.Errorf("summary reason %q: written by the launcher %v, want %v", reason, byLauncher, !c.ownSummary)
			}
			last := awaitRow(t, ctx, filepath.Join(out, "metrics.csv"))
			if steps, _ := s["steps"].(float64); steps < firstRow || (!c.ownSummary && steps != last) {
				t.Errorf("summary steps %v; metrics.csv rows from step %v to %v", s["steps"], firstRow, last)
			}
			t.Logf("summary: steps %v (metrics.csv from %v to %v), reason %q", s["steps"], firstRow, last, reason)
		})
	}
}

// awaitRow waits for the metrics.csv at path to hold a complete row and
// returns the step of its last one; the file must end with a complete row.
func awaitRow(t *testing.T, ctx context.Context, path string) float64 {
	t.Helper()
	for {
		b, _ := os.ReadFile(path)
		if lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n"); len(lines) > 1 && strings.HasSuffix(string(b), "\n") {
			step, err := strconv.ParseFloat(strings.SplitN(lines[len(lines)-1], ",", 2)[0], 64)
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			return step
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s holds no complete row:\n%s", path, b)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// herd launch runs DQN with two learner processes, each with its own
// replay: learner 0 writes the run with both learners' steps, none
// learned twice.
func TestLaunchTwoOffLearners(t *testing.T) {
	srv, ctx := natsRun(t, 120*time.Second)
	p := filepath.Join(t.TempDir(), "dqn-learners.yaml")
	const steps = 4000
	cfg := fmt.Sprintf("algo: dqn\nenv: CartPole-v1\nsteps: %d\nlog_every: 500\nruntime: {executor: dist, env_workers: 2, learners: 2}\n"+
		"dqn: {num_envs: 1, batch_size: 32, buffer_size: 2000, learning_starts: 500, train_frequency: 10, net_arch: [16]}\n", steps)
	if err := os.WriteFile(p, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "run")
	r := <-launchAsync(t, ctx, "--config", p, "--out", out, "--quiet", "--nats", srv.URL(), "--run", "two-off-learners")
	if r.err != nil {
		t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", r.err, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "2 learners") {
		t.Errorf("stdout does not name 2 learners:\n%s", r.stdout)
	}
	s := readSummary(t, out)
	if s["steps"].(float64) != steps || s["episodes"].(float64) == 0 {
		t.Errorf("summary: steps %v (want %d), episodes %v", s["steps"], steps, s["episodes"])
	}
	if d, _ := s["dist"].(map[string]any); d == nil || d["dist/duplicates"] != 0.0 {
		t.Errorf("summary dist: %v, want 0 duplicates", s["dist"])
	}
}
