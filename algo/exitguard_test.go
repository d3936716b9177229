package algo

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"herd/internal/exitguard"
)

// The commit of an interrupted --force run holds the command's exit guard,
// so that a second Ctrl-C (which takes the guard before it exits) waits
// for the commit instead of leaving the directory torn: while the guard is
// taken, the run is not committed; once it is given back, it is.
func TestTrainRunCommitHoldsExitGuard(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run")
	if _, err := TrainRun(context.Background(), scriptRun(t, out), RunOptions{}); err != nil {
		t.Fatal(err)
	}
	var g exitguard.Guard
	g.Wait() // a second Ctrl-C being handled
	ctx, cancel := context.WithCancel(exitguard.With(context.Background(), &g))
	cancel() // interrupted
	done := make(chan error, 1)
	go func() {
		_, err := TrainRun(ctx, scriptRun(t, out), RunOptions{Dir: DirForce})
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("the run was committed (%v) while the exit guard was taken", err)
	case <-time.After(2 * time.Second):
	}
	if _, err := os.Stat(filepath.Join(out, stagingDir, SummaryFile)); err != nil {
		t.Fatalf("the interrupted run is not staged while the commit waits: %v", err)
	}
	g.Release()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted --force run: %v, want a clean interruption", err)
	}
	if s, err := os.ReadFile(filepath.Join(out, SummaryFile)); err != nil || !strings.Contains(string(s), "interrupted") {
		t.Fatalf("the committed summary: %v %s", err, s)
	}
}
