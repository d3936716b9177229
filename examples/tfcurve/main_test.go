package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"herd/metrics"
)

// TestExample draws the curve of a small recorded run from its event file;
// a directory without one is an error.
func TestExample(t *testing.T) {
	dir := t.TempDir()
	r, err := metrics.NewRecorder(metrics.Options{Dir: dir, Algo: "ppo", Env: "CartPole-v1", Seed: 1, TotalSteps: 4000, LogEvery: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for step := int64(500); step <= 4000; step += 500 {
		r.Episode(step, float64(step)/100, int(step/100))
		r.Step(step)
	}
	if _, err := r.Close(false); err != nil {
		t.Fatal(err)
	}
	png := filepath.Join(t.TempDir(), "curve.png")
	if err := run([]string{dir, png}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(png)
	if err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
		t.Fatalf("no PNG written: %v", err)
	}
	if err := run([]string{t.TempDir(), png}); err == nil {
		t.Error("a run directory without an event file drew a curve")
	}
}
