package main

import (
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// takenMetricsPort returns a --metrics-addr for herd launch whose env
// worker 0 port (the learner's + 2, after one policy worker) is held by
// the test, so that env worker 0 fails at every start, while the others'
// ports are free.
func takenMetricsPort(t *testing.T) string {
	t.Helper()
	free := func(port int) bool {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			return false
		}
		l.Close()
		return true
	}
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := l.Addr().(*net.TCPAddr).Port
		if p > 2 && free(p-2) && free(p-1) && free(p+1) {
			t.Cleanup(func() { l.Close() })
			return fmt.Sprintf("127.0.0.1:%d", p-2)
		}
		l.Close()
	}
	t.Fatal("no four consecutive free ports")
	return ""
}

// A worker that keeps failing past --max-restarts ends the run: launch
// exits 1 at once with the "failed N times" error, and the learner's
// summary.json says the run failed and why (not "interrupted").
func TestLaunchRestartsExceededFails(t *testing.T) {
	srv, ctx := natsRun(t, 90*time.Second)
	out := filepath.Join(t.TempDir(), "run")
	done := launchAsync(t, ctx, "--config", writeDistConfig(t, 100000), "--out", out, "--quiet", "--nats", srv.URL(), "--run", "crashloop",
		"--ttl", "1s", "--max-restarts", "1", "--metrics-addr", takenMetricsPort(t))
	var r launchResult
	select {
	case r = <-done:
	case <-ctx.Done():
		t.Fatal("launch did not end after a worker exceeded --max-restarts")
	}
	if r.err == nil || exitCode(r.err) != exitFailed || !strings.Contains(r.err.Error(), "env worker 0 failed 2 times") {
		t.Fatalf("launch: %v (exit %d), want exit %d and \"env worker 0 failed 2 times\"\nstderr:\n%s", r.err, exitCode(r.err), exitFailed, r.stderr)
	}
	s := readSummary(t, out)
	if s["status"] != "failed" || !strings.Contains(fmt.Sprint(s["reason"]), "env worker 0 failed 2 times") {
		t.Errorf("summary status %v, reason %q; want failed, naming env worker 0", s["status"], s["reason"])
	}
}
