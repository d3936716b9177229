package metrics

import (
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A run whose learner was killed mid-row gets a failed summary from the
// last complete row, and its metrics.csv loses the partial row.
func TestWriteFailedFromLastRow(t *testing.T) {
	dir := t.TempDir()
	csv := "step,wall_seconds,sps,episodes,return_mean_100,return_std_100,length_mean_100,return_recent,dist/duplicates,dist/dropped\n" +
		"256,0.5,512,3,20,2,20,21,0,\n" +
		"512,1,512,7,25.5,3,25,30,1,4\n" +
		"768,1.5,51"
	if err := os.WriteFile(filepath.Join(dir, "metrics.csv"), []byte(csv), 0o644); err != nil {
		t.Fatal(err)
	}
	since := time.Now().Add(-time.Minute)
	written, err := WriteFailed(dir, Summary{Reason: "learner killed", Algo: "ppo", Env: "CartPole-v1", Seed: 3, PlannedSteps: 4096, WallSeconds: 2}, since)
	if err != nil || !written {
		t.Fatalf("written %v, err %v", written, err)
	}
	s, err := ReadSummary(filepath.Join(dir, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	if s.Status != StatusFailed || s.Reason != "learner killed" || s.Steps != 512 || s.Episodes != 7 ||
		s.FinalReturnMean100 != 25.5 || s.FinalLengthMean100 != 25 || s.SPS != 256 || s.Algo != "ppo" || s.PlannedSteps != 4096 {
		t.Errorf("summary %+v", s)
	}
	if len(s.Dist) != 2 || s.Dist["dist/duplicates"] != 1 || s.Dist["dist/dropped"] != 4 {
		t.Errorf("dist %v", s.Dist)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "metrics.csv"))
	if want := csv[:len(csv)-len("768,1.5,51")]; string(b) != want {
		t.Errorf("metrics.csv not cut to its last complete row:\n%q", b)
	}

	// The run's own summary (written since) stays; an earlier run's is
	// replaced.
	before, _ := os.ReadFile(filepath.Join(dir, "summary.json"))
	if written, err := WriteFailed(dir, Summary{Reason: "other"}, since); err != nil || written {
		t.Fatalf("a summary written since was replaced: written %v, err %v", written, err)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, "summary.json")); string(after) != string(before) {
		t.Error("summary.json changed")
	}
	if written, err := WriteFailed(dir, Summary{Reason: "new run"}, time.Now().Add(time.Minute)); err != nil || !written {
		t.Fatalf("an earlier run's summary was kept: written %v, err %v", written, err)
	}
	if s, _ := ReadSummary(filepath.Join(dir, "summary.json")); s.Reason != "new run" || s.Steps != 0 {
		t.Errorf("an earlier run's metrics.csv was read: %+v", s)
	}
}

// A learner that died before it wrote any file leaves a directory that
// does not exist: it gets one with the failed summary, no steps.
func TestWriteFailedNoFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	if written, err := WriteFailed(dir, Summary{Reason: "exit status 1"}, time.Now()); err != nil || !written {
		t.Fatalf("written %v, err %v", written, err)
	}
	s, err := ReadSummary(filepath.Join(dir, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	if s.Status != StatusFailed || s.Steps != 0 || !math.IsNaN(s.FinalReturnMean100) || s.Dist != nil {
		t.Errorf("summary %+v", s)
	}
}
