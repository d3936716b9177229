package launch

import (
	"context"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"
)

// A worker that exceeds its restarts ends the run, and the launcher ends
// with it even when another worker's process exits by itself while the
// learner is still saving: the supervisor must not wait a second time for
// a process whose exit it already took.
func TestSupervisorEndsAfterRestartsExceeded(t *testing.T) {
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
		t.Skip("needs sh")
	}
	// $1 is the worker's role: the learner saves for a while after
	// SIGTERM; "quits" exits by itself, before the learner is done; "crash"
	// fails at once.
	script := `case "$1" in
learner) trap 'sleep 1; exit 130' TERM; while :; do sleep 0.05; done;;
quits) sleep 0.3; exit 1;;
crash) exit 1;;
esac`
	s := (&supervisor{command: []string{"sh", "-c", script, "sh"}, stderr: io.Discard, ttl: time.Second,
		restarts: 0, window: time.Minute, endRun: func() {}}).init(context.Background())
	s.start("quits", []string{"quits"}, true, io.Discard)
	s.start("learner", []string{"learner"}, false, io.Discard)
	s.start("crash", []string{"crash"}, true, io.Discard)
	type result struct {
		exit int
		errs []error
	}
	done := make(chan result, 1)
	go func() {
		exit, errs := s.wait()
		done <- result{exit, errs}
	}()
	select {
	case r := <-done:
		t.Logf("learner exit %d, errors %v", r.exit, r.errs)
		if err := errors.Join(r.errs...); err == nil || !strings.Contains(err.Error(), "crash failed 1 times") {
			t.Errorf("errors %v, want crash's \"failed 1 times\"", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the supervisor did not end after a worker exceeded its restarts")
	}
}

// A learner killed by a signal is started again to resume the run, unless
// the run cannot resume: then it is not, and the run fails at once, naming
// the kill and why, with the other workers stopped.
func TestSupervisorKilledLearner(t *testing.T) {
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
		t.Skip("needs sh")
	}
	for _, noResume := range []string{"", "several data-parallel learners save no training state yet"} {
		// The learner kills itself on its first start and exits 0 on the
		// next (its marker file then exists); a peer runs until stopped.
		marker := t.TempDir() + "/started"
		script := `case "$1" in
learner) [ -e "$2" ] && exit 0; : >"$2"; kill -9 $$;;
peer) trap 'exit 0' TERM; while :; do sleep 0.05; done;;
esac`
		s := (&supervisor{command: []string{"sh", "-c", script, "sh"}, stderr: io.Discard, ttl: time.Second,
			restarts: 3, window: time.Minute, endRun: func() {}, noResume: noResume}).init(context.Background())
		t0 := time.Now()
		s.start("learner", []string{"learner", marker}, false, io.Discard)
		s.startPeer("learner 1", []string{"peer"}, io.Discard)
		exit, errs := s.wait()
		err := errors.Join(errs...)
		switch {
		case noResume == "" && (exit != 0 || err != nil):
			t.Errorf("resumable: learner exit %d, errors %v; want it started again, exit 0", exit, err)
		case noResume != "" && (err == nil || !strings.Contains(err.Error(), "learner was killed") || !strings.Contains(err.Error(), noResume)):
			t.Errorf("not resumable: errors %v; want the kill and %q named", err, noResume)
		case time.Since(t0) > 10*time.Second:
			t.Errorf("noResume %q: the run ended after %v", noResume, time.Since(t0))
		}
	}
}
