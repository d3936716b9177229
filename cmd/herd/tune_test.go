package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"herd/algo"
	"herd/algo/all"
)

// TestTuneCLI: herd tune measures, prints the table and the choice, and
// writes the plot and a config that resolves to the pal executor with the
// chosen counts (M > 1 allowed), keeping the file's other runtime keys;
// bad flags are refused.
func TestTuneCLI(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "dqn.yaml")
	if err := os.WriteFile(cfg, []byte("# tiny\nalgo: dqn\nenv: CartPole-v1\nsteps: 2000\nruntime: {executor: pal, learner_mode: sync, refresh_every: 2}\ndqn: {buffer_size: 1000, batch_size: 32, learning_starts: 500, net_arch: [16]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := herd(t, dir, "tune", "--config", cfg, "--cores", "3", "--budget", "400ms", "--rounds", "2", "--out", dir)
	if r.code != 0 || !strings.Contains(r.stdout, "choice:") || !strings.Contains(r.stdout, "f_a(x)") ||
		!strings.Contains(r.stdout, "medians of 2 rounds") || !strings.Contains(r.stdout, "run: 2000 env steps, the first 500 before any update") {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if fi, err := os.Stat(filepath.Join(dir, "fig12.png")); err != nil || fi.Size() == 0 {
		t.Fatalf("fig12.png: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "dqn-tuned.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := algo.Resolve(b, all.Specs(), algo.Overrides{})
	if err != nil {
		t.Fatalf("tuned config: %v\n%s", err, b)
	}
	if rc := res.Header.Runtime; rc.Executor != "pal" || rc.Actors < 1 || rc.Learners < 1 || rc.Actors+rc.Learners > 3 ||
		rc.LearnerMode != "sync" || rc.RefreshEvery != 2 {
		t.Errorf("tuned runtime %+v", rc)
	}
	for _, bad := range [][]string{{"--cores", "1"}, {"--budget", "1ms"}, {"--steps", "0"}, {"--rounds", "0"}, {"--joint-rounds", "-1"}, {"--cores", "3", "--budget", "400ms", "--rounds", "3"}} {
		if r := herd(t, dir, append([]string{"tune", "--config", cfg}, bad...)...); r.code == 0 {
			t.Errorf("%v: exit 0", bad)
		}
	}
	ppo := filepath.Join(dir, "ppo.yaml")
	os.WriteFile(ppo, []byte("algo: ppo\nenv: CartPole-v1\nsteps: 512\n"), 0o644)
	if r := herd(t, dir, "tune", "--config", ppo, "--budget", "200ms", "--rounds", "1"); r.code == 0 || !strings.Contains(r.stderr+r.stdout, "executor pal needs a transition learner; ppo has") {
		t.Errorf("ppo: exit %d, %s%s", r.code, r.stdout, r.stderr)
	}
}
