package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"herd/algo"
	"herd/algo/all"
	"herd/bench"
	"herd/metrics"
	"herd/run"
)

func runHerd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

// TestTrainAndEval drives the CLI end to end on a tiny budget: train writes
// the five run files, eval reads them back and prints mean ± std.
func TestTrainAndEval(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "ppo.yaml")
	if err := os.WriteFile(cfg, []byte("algo: ppo\nenv: CartPole-v1\nsteps: 100000\nppo:\n  num_envs: 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run := filepath.Join(dir, "run")
	out, err := runHerd(t, "train", "--config", cfg, "--steps", "1024", "--seed", "3", "--out", run,
		"--set", "num_steps=64", "--set", "update_epochs=2")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "done: 1024 steps") {
		t.Fatalf("output:\n%s", out)
	}
	for _, f := range []string{"config.yaml", "metrics.csv", "summary.json", "curve.png", "model.safetensors"} {
		if _, err := os.Stat(filepath.Join(run, f)); err != nil {
			t.Errorf("missing %s", f)
		}
	}
	resolved, _ := os.ReadFile(filepath.Join(run, "config.yaml"))
	for _, want := range []string{"seed: 3", "steps: 1024", "num_steps: 64", "update_epochs: 2", "num_envs: 2"} {
		if !strings.Contains(string(resolved), want) {
			t.Errorf("config.yaml lacks %q:\n%s", want, resolved)
		}
	}
	out, err = runHerd(t, "eval", "--run", run, "--episodes", "3")
	if err != nil || !strings.Contains(out, "ppo CartPole-v1: 3 episodes, return ") || !strings.Contains(out, " ± ") {
		t.Fatalf("eval: %v\n%s", err, out)
	}
}

func TestTrainRejectsBadInput(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(cfg, []byte("algo: ppo\nenv: CartPole-v1\nsteps: 1000\nppo:\n  learning_rat: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"train", "--config", cfg}, "learning_rat"},
		{[]string{"train", "--algo", "ppo", "--env", "CartPole-v1", "--steps", "1000", "--set", "nope=1"}, "nope"},
		{[]string{"train", "--algo", "xyz", "--env", "CartPole-v1", "--steps", "1000"}, "xyz"},
		{[]string{"train", "--config", filepath.Join(dir, "missing.yaml")}, "missing.yaml"},
		{[]string{"eval"}, "--run"},
		{[]string{"eval", "--run", dir}, "config.yaml"},
		{[]string{"bench", "learn", "--seeds", "x"}, "--seeds"},
		{[]string{"bench", "learn", "--config", cfg, "--steps", "-1"}, "--steps"},
		{[]string{"bench", "persist", "--keys", "0"}, "--keys"},
		{[]string{"bench", "persist", "--value-bytes", "0"}, "--value-bytes"},
		{[]string{"bench", "persist", "--reads", "-5"}, "--reads"},
		{[]string{"bench", "replay", "--fanout", "0"}, "--fanout"},
		{[]string{"bench", "replay", "--seconds", "-1"}, "--seconds"},
		{[]string{"bench", "replay", "--ratio", "NaN"}, "--ratio"},
		{[]string{"bench", "replay", "--capacity", "0"}, "--capacity"},
		{[]string{"bench", "nn", "--repeats", "0"}, "--repeats"},
		{[]string{"bench", "nn", "--min-time", "-1s"}, "--min-time"},
		{[]string{"bench", "env", "--num-envs", "0"}, "--num-envs"},
		{[]string{"train", "--algo", "ppo", "--env", "CartPole-v1", "--steps", "1000", "--force", "--resume"}, "exclude"},
		{[]string{"eval", "--run", dir, "--episodes", "0"}, "config.yaml"},
	} {
		out, err := runHerd(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one mentioning %q\n%s", tc.args, err, tc.want, out)
		}
	}
}

// herd train run twice without --out writes two run directories, and says
// at start how it rounds --steps to whole rollouts.
func TestTrainDefaultOutAndRounding(t *testing.T) {
	t.Chdir(t.TempDir())
	args := []string{"train", "--algo", "ppo", "--env", "CartPole-v1", "--steps", "1100", "--quiet",
		"--set", "num_envs=2", "--set", "num_steps=64", "--set", "update_epochs=1"}
	for _, dir := range []string{"runs/ppo-CartPole-v1-1", "runs/ppo-CartPole-v1-1-2"} {
		out, err := runHerd(t, args...)
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		for _, want := range []string{"1100 steps (rounded down to 8 × 128 = 1024 steps", "→ " + dir + "\n", "done: 1024 steps", "wrote " + dir + "/{"} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
	}
	out, err := runHerd(t, append(args, "--out", "runs/ppo-CartPole-v1-1")...)
	if err == nil || !strings.Contains(err.Error(), "already holds a run") {
		t.Fatalf("explicit --out holding a run: %v\n%s", err, out)
	}
}

// herd --help names every bench subcommand.
func TestHelpListsEveryBench(t *testing.T) {
	out, err := runHerd(t, "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range bench.Command().Commands() {
		if !strings.Contains(strings.NewReplacer("(", " ", ")", ",").Replace(out), " "+c.Name()+",") {
			t.Errorf("herd --help does not name bench %s:\n%s", c.Name(), out)
		}
	}
}

// herd train --help prints the capability table: per executor what it
// needs and the algorithms it runs, as algo.Matrix derives them.
func TestTrainHelpListsExecutors(t *testing.T) {
	out, err := runHerd(t, "train", "--help")
	if err != nil {
		t.Fatal(err)
	}
	want := algo.Matrix{Executors: run.Executors(), Specs: all.Specs()}.Text()
	if !strings.Contains(out, want) || !strings.Contains(want, "  pal: ") || !strings.Contains(want, "runs: dqn, sac, td3, ddpg") {
		t.Errorf("herd train --help lacks the executor table:\n%s\nwant:\n%s", out, want)
	}
}

// herd train --metrics-addr serves the live run to Prometheus: a scrape
// during training sees the steps move, and the run directory gets the
// TensorBoard event file.
func TestTrainMetricsAddrLiveScrape(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pr, pw := io.Pipe()
	root := newRootCmd()
	root.SetOut(pw)
	root.SetErr(pw)
	root.SetArgs([]string{"train", "--algo", "ppo", "--env", "CartPole-v1", "--steps", "100000000", "--quiet",
		"--out", filepath.Join(dir, "run"), "--metrics-addr", "127.0.0.1:0", "--log-every", "512"})
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx); pw.Close() }()
	lines := bufio.NewScanner(pr)
	var url string
	for url == "" && lines.Scan() {
		if u, ok := strings.CutPrefix(lines.Text(), "metrics for Prometheus at "); ok {
			url = u
		}
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	if url == "" {
		t.Fatalf("no metrics address printed: %v", <-done)
	}
	steps := func() float64 { return scrapeSteps(t, url) }
	var seen []float64
	for len(seen) < 2 && ctx.Err() == nil {
		if s := steps(); s > 0 && (len(seen) == 0 || s > seen[0]) {
			seen = append(seen, s)
		}
		time.Sleep(100 * time.Millisecond)
	}
	cancel() // as Ctrl-C: the run stops and saves
	err := <-done
	if len(seen) < 2 {
		t.Fatalf("herd_env_steps_total did not move: %v (run: %v)", seen, err)
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted run: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "run", metrics.EventsFile)); err != nil {
		t.Fatalf("no TensorBoard event file: %v", err)
	}
}
