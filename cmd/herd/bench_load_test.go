package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"herd/bench"
)

// TestMain lets the test binary stand in for herd when --load re-executes
// it as a busy loop (os.Executable is the test binary here).
func TestMain(m *testing.M) {
	if len(os.Args) == 3 && os.Args[1] == "bench" && os.Args[2] == bench.SpinCommand {
		main()
		return
	}
	os.Exit(m.Run())
}

// TestBenchLearnLoadPin drives bench learn with --load and two --pin
// settings: one row per setting, the ratio summary, and no busy loop left
// behind.
func TestBenchLearnLoadPin(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "a2c.yaml")
	if err := os.WriteFile(cfg, []byte("algo: a2c\nenv: CartPole-v1\nsteps: 100000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runHerd(t, "bench", "learn", "--config", cfg, "--steps", "200", "--seeds", "1",
		"--load", "1", "--pin", "all", "--pin", "0")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"pin", "load", "final_return_mean_100", "median wall over 1 runs: pin all", "pin 0 "} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if kids := children(t); len(kids) != 0 {
		t.Errorf("child processes left: %v", kids)
	}
}

// TestBenchLearnOutRepeats: with --out, a repeated seed and two pin
// settings each write a run directory of their own instead of failing on
// the first repeat.
func TestBenchLearnOutRepeats(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "a2c.yaml")
	if err := os.WriteFile(cfg, []byte("algo: a2c\nenv: CartPole-v1\nsteps: 100000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	runs := filepath.Join(dir, "runs")
	out, err := runHerd(t, "bench", "learn", "--config", cfg, "--steps", "200", "--seeds", "1,1",
		"--pin", "all", "--pin", "0", "--out", runs)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "median wall over 2 runs") {
		t.Errorf("output lacks the 2-run medians:\n%s", out)
	}
	for _, pin := range []string{"pin-all", "pin-0"} {
		for _, rep := range []string{"rep-1", "rep-2"} {
			f := filepath.Join(runs, pin, rep, "a2c-CartPole-v1-1", "summary.json")
			if _, err := os.Stat(f); err != nil {
				t.Errorf("run directory missing: %v", err)
			}
		}
	}
}

// children lists this process's child processes.
func children(t *testing.T) []string {
	t.Helper()
	tasks, err := filepath.Glob("/proc/self/task/*/children")
	if err != nil || len(tasks) == 0 {
		t.Skip("no /proc/self/task/*/children here")
	}
	var kids []string
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		kids = append(kids, strings.Fields(string(b))...)
	}
	return kids
}

func TestBenchLearnLoadFlagErrors(t *testing.T) {
	for _, args := range [][]string{
		{"--load", "-1"},
		{"--load", "100000"},
		{"--pin", "x"},
		{"--pin", "3-1"},
		{"--pin", "-1"},
		{"--pin", "all", "--pin", "0", "--md", "/dev/null"},
	} {
		out, err := runHerd(t, append([]string{"bench", "learn", "--config", "none.yaml"}, args...)...)
		if err == nil || !strings.Contains(err.Error(), "--") {
			t.Errorf("%v: err %v, want a flag error\n%s", args, err, out)
		}
	}
}
