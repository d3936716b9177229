package main

import (
	"context"
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// resumeSegment is the env steps of one segment of writeResumeConfig's
// runs: 4 envs × 32 steps.
const resumeSegment = 4 * 32

// writeResumeConfig writes a dist PPO CartPole config of iters segments
// with inline env workers, checkpointed every `every` segments.
func writeResumeConfig(t *testing.T, iters, every int) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "ppo-dist.yaml")
	cfg := fmt.Sprintf("algo: ppo\nenv: CartPole-v1\nsteps: %d\ncheckpoint_every: %d\nlog_every: %d\n"+
		"runtime: {executor: dist, env_workers: 2, inference: inline}\n"+
		"ppo: {num_envs: 4, num_steps: 32, num_minibatches: 2, update_epochs: 1}\n", iters*resumeSegment, every*resumeSegment, resumeSegment)
	if err := os.WriteFile(p, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// awaitCheckpoint waits until out holds a checkpoint past step 0, so that
// a kill then leaves the run something to resume beyond its start.
func awaitCheckpoint(t *testing.T, ctx context.Context, out string) {
	t.Helper()
	for {
		ents, _ := os.ReadDir(filepath.Join(out, "checkpoints"))
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), ".herdstate") && e.Name() != "state-000000000000000.herdstate" {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no checkpoint past step 0 in %s", out)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// checkResumed checks the run in out after one kill of its learner: it
// completed every step of iters segments, summary.json records the resume
// and one learner start resumed, nothing acknowledged was learned twice
// (dist/duplicates 0), and metrics.csv has each step once, in order. It
// returns summary.json.
func checkResumed(t *testing.T, out string, iters int) map[string]any {
	return checkResumedSteps(t, out, int64(iters*resumeSegment))
}

// checkResumedSteps is checkResumed for a run of `steps` env steps.
func checkResumedSteps(t *testing.T, out string, steps int64) map[string]any {
	t.Helper()
	s := readSummary(t, out)
	if s["status"] != "completed" || s["steps"].(float64) != float64(steps) {
		t.Errorf("summary status %v, steps %v; want completed, %d", s["status"], s["steps"], steps)
	}
	from, ok := s["resumed_from_step"].(float64)
	if !ok || from <= 0 || from >= float64(steps) {
		t.Errorf("summary resumed_from_step %v, want a step inside the run", s["resumed_from_step"])
	}
	d, _ := s["dist"].(map[string]any)
	if d["dist/resumes"] != 1.0 || d["dist/duplicates"] != 0.0 {
		t.Errorf("dist resumes %v, duplicates %v; want 1 and 0", d["dist/resumes"], d["dist/duplicates"])
	}
	// Versions numbered below the killed learner's would be ignored by the
	// env workers, who would wait for them in vain (stale weights).
	if d["dist/stale_weights"] != 0.0 {
		t.Errorf("dist/stale_weights %v: the env workers did not take the resumed learner's versions", d["dist/stale_weights"])
	}
	t.Logf("resumed from step %v; acknowledged and lost with the killed learner (dist/discarded): %v", from, d["dist/discarded"])
	f, err := os.Open(filepath.Join(out, "metrics.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	last := int64(0)
	for _, r := range rows[1:] {
		step, err := strconv.ParseInt(r[0], 10, 64)
		if err != nil || step <= last {
			t.Fatalf("metrics.csv step %q after %d: a row repeated or out of order", r[0], last)
		}
		last = step
	}
	if last != steps {
		t.Errorf("metrics.csv ends at step %d, want %d", last, steps)
	}
	return s
}

// kill -9 of the learner under herd launch, after its first periodic
// checkpoint: launch restarts it, the new learner resumes from the run
// directory's newest checkpoint, publishes versions above the killed
// learner's, and the run completes with exit 0 (issues #39, #41).
func TestLaunchResumesKilledLearner(t *testing.T) {
	// Checkpoints far enough apart for the env workers' progress records
	// (saved every second) to show acks past one before the next.
	const iters, every = 1200, 200
	killLearnerAndResume(t, writeResumeConfig(t, iters, every), iters*resumeSegment, resumeSegment)
}

// The same for the Ape-X topology (DQN): the resumed learner continues
// with the killed one's replay, networks and optimizer from its newest
// checkpoint.
func TestLaunchResumesKilledApeXLearner(t *testing.T) {
	// configs/dqn-cartpole-dist.yaml's settings, shorter: one 50-step
	// chunk per sample (distexec.ChunkEnvSteps), learning from step 1000,
	// with updates every 2 steps so that the run outlasts the env
	// workers' progress records (saved every second) that time the kill.
	const steps, chunk = 150000, 50
	p := filepath.Join(t.TempDir(), "dqn-dist.yaml")
	cfg := fmt.Sprintf("algo: dqn\nenv: CartPole-v1\nsteps: %d\ncheckpoint_every: 30000\nlog_every: %d\n"+
		"runtime: {executor: dist, env_workers: 2, refresh_every: 1, publish_every: 40}\n"+
		"dqn: {num_envs: 1, buffer_size: 10000, learning_starts: 1000, train_frequency: 2, target_network_frequency: 500, batch_size: 64, net_arch: [64, 64]}\n", steps, chunk)
	if err := os.WriteFile(p, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	s := killLearnerAndResume(t, p, steps, chunk)
	if from := s["resumed_from_step"].(float64); from < 1000 {
		t.Errorf("resumed from step %v, before learning started: the replay and networks were not exercised", from)
	}
}

// killLearnerAndResume launches the dist run of config (steps env steps,
// sample env steps per pushed sample), kills its learner with SIGKILL
// after its first periodic checkpoint, and checks that launch restarted
// it, that it resumed and completed the run (checkResumedSteps), and that
// the samples acknowledged after the checkpoint it resumed from are
// counted in dist/discarded. It returns summary.json.
func killLearnerAndResume(t *testing.T, config string, steps, sample int64) map[string]any {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("kills a process")
	}
	srv, ctx := natsRun(t, 240*time.Second)
	out := filepath.Join(t.TempDir(), "run")
	const run = "resume-kill"
	done := launchAsync(t, ctx, "--config", config, "--out", out, "--quiet", "--nats", srv.URL(), "--run", run, "--ttl", "1s")
	mem := watchRun(t, ctx, srv.URL(), run)
	pid := awaitPIDs(t, ctx, mem, done, "learner-0", "env-0", "env-1")["learner-0"]
	awaitCheckpoint(t, ctx, out)
	// Kill once the env workers' records show 2 samples acknowledged past
	// the newest checkpoint: the resumed learner must count them lost.
	acked := func() int64 {
		ps, err := mem.Progress(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return int64(ps["env-0"].Seq + ps["env-1"].Seq)
	}
	for acked() < newestCheckpoint(t, out)/sample+2 {
		select {
		case r := <-done:
			t.Fatalf("the run ended before the kill: %v\n%s", r.err, r.stderr)
		case <-time.After(20 * time.Millisecond):
		}
	}
	// The records lag the acks: the acked count at the kill is at least this.
	atKill := acked()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("%v\nstderr:\n%s", r.err, r.stderr)
	}
	if !strings.Contains(r.stderr, "learner was killed") || !strings.Contains(r.stdout, "resuming from step") {
		t.Errorf("no restart of the killed learner, or no resume, reported\nstdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}
	s := checkResumedSteps(t, out, steps)
	// The samples acknowledged after the checkpoint resumed from were
	// learned by the killed learner only: lost, and counted.
	from := int64(s["resumed_from_step"].(float64))
	d := s["dist"].(map[string]any)
	if lost := atKill - from/sample; d["dist/discarded"].(float64) < float64(lost) {
		t.Errorf("dist/discarded %v, want at least the %d samples acknowledged after step %d", d["dist/discarded"], lost, from)
	}
	return s
}

// newestCheckpoint returns the step of out's newest checkpoint.
func newestCheckpoint(t *testing.T, out string) int64 {
	t.Helper()
	ents, _ := os.ReadDir(filepath.Join(out, "checkpoints"))
	newest := int64(-1)
	for _, e := range ents {
		var step int64
		if _, err := fmt.Sscanf(e.Name(), "state-%d.herdstate", &step); err == nil && strings.HasSuffix(e.Name(), ".herdstate") {
			newest = max(newest, step)
		}
	}
	return newest
}
