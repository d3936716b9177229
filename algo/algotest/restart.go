package algotest

import (
	"context"
	"encoding/csv"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"herd/algo"
	"herd/metrics"
)

// ResumeRestarts checks a run whose envs cannot save their state:
// resolve(out) resolves it (checkpoint_every, log_every and steps set) into
// the run directory out, and its checkpoints hold everything but the envs.
// Interrupted once a checkpoint at step cuts[0] or later is written,
// resumed and interrupted again past cuts[1], then resumed to its end, it
// must complete with a metrics.csv row for each log_every interval the
// uninterrupted run's has one for (none missing, none twice), each resume continuing from the checkpoint before
// it (resumed_from_step), and summary.json saying that its checkpoints
// leave the envs out and that two resumes restarted numEnvs envs each.
// Every run is TrainRun's with base (its Executors).
func ResumeRestarts(t *testing.T, resolve func(out string) *algo.Resolved, base algo.RunOptions, numEnvs int, cuts [2]int64) {
	t.Helper()
	root := t.TempDir()
	whole := filepath.Join(root, "whole")
	ws, err := algo.TrainRun(context.Background(), resolve(whole), base)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(ws.Checkpoints, "on: the envs are not saved") || ws.EnvsRestarted != nil {
		t.Fatalf("uninterrupted run: checkpoints %q, envs_restarted %+v", ws.Checkpoints, ws.EnvsRestarted)
	}
	logEvery := resolve(whole).Header.LogEvery
	_, want := stepColumn(t, whole, logEvery)

	out := filepath.Join(root, "resumed")
	var from []int64
	opt := base
	opt.Resumed = func(step int64, _ string, _ []string) { from = append(from, step) }
	// last[i]: the newest checkpoint of interrupted run i, which the next
	// run resumes from.
	var last [2]int64
	for i, cut := range cuts {
		ctx, cancel := context.WithCancel(context.Background())
		o := opt
		if i > 0 {
			o.Dir = algo.DirResume
		}
		o.Checkpointed = func(ci algo.CheckpointInfo) {
			last[i] = ci.Step
			if ci.Step >= cut {
				cancel()
			}
		}
		_, err := algo.TrainRun(ctx, resolve(out), o)
		cancel()
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("run interrupted past step %d: %v", cut, err)
		}
	}
	opt.Dir = algo.DirResume
	s, err := algo.TrainRun(context.Background(), resolve(out), opt)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(from, last[:]) || last[0] < cuts[0] || last[1] < cuts[1] || s.ResumedFromStep == nil || *s.ResumedFromStep != from[1] {
		t.Fatalf("resumed from %v (summary %v), the interrupted runs' newest checkpoints %v", from, s.ResumedFromStep, last)
	}
	if steps, got := stepColumn(t, out, logEvery); !slices.Equal(got, want) || steps[len(steps)-1] != s.PlannedSteps {
		t.Fatalf("metrics.csv steps %v: the log_every intervals %v, the uninterrupted run's %v", steps, got, want)
	}
	r := s.EnvsRestarted
	if r == nil || r.Envs != int64(2*numEnvs) || r.Resumes != 2 || !strings.Contains(r.Reason, "cannot be saved") {
		t.Fatalf("envs_restarted %+v, want %d envs over 2 resumes", r, 2*numEnvs)
	}
	if !strings.HasPrefix(s.Checkpoints, "on: the envs are not saved") || s.Status != metrics.StatusCompleted {
		t.Fatalf("checkpoints %q, status %q", s.Checkpoints, s.Status)
	}
}

// stepColumn is the step column of dir's metrics.csv, and for each row
// the log_every interval it closes: rows are written at the first step at
// or past each multiple of log_every, which an asynchronous executor
// (PAL) reaches at steps that vary from run to run.
func stepColumn(t *testing.T, dir string, logEvery int64) (steps, intervals []int64) {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "metrics.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil || len(rows) < 2 || rows[0][0] != "step" {
		t.Fatalf("%s/metrics.csv: %v (%d rows)", dir, err, len(rows))
	}
	for _, r := range rows[1:] {
		s, err := strconv.ParseInt(r[0], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		steps, intervals = append(steps, s), append(intervals, s/logEvery)
	}
	return steps, intervals
}
