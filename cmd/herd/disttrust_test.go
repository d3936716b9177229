package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"herd/launch"
	"herd/transport"
)

// A NATS URL with a password given to herd launch appears neither in
// what launch and its workers print nor on the workers' command lines
// (/proc/PID/cmdline, readable by every user); and the run reports its
// dist counters on stdout and in summary.json.
func TestLaunchKeepsSecretsAndReportsCounters(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	const password = "pw-Zq8v3Kx1"
	srv := startNATS(t, transport.ServerOptions{User: "herd", Password: password})
	url := strings.Replace(srv.URL(), "nats://", "nats://herd:"+password+"@", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	out := filepath.Join(t.TempDir(), "run")
	done := launchAsync(t, ctx, "--config", writeDistConfig(t, 60), "--out", out, "--quiet",
		"--nats", url, "--run", "secret", "--ttl", "1s")
	mem := watchRun(t, ctx, url, "secret")
	seen := map[string]bool{}
	var r launchResult
wait:
	for {
		select {
		case r = <-done:
			break wait
		case <-time.After(50 * time.Millisecond):
		}
		ms, _ := mem.Members(ctx)
		for _, m := range ms {
			pid, err := strconv.Atoi(string(m.Info))
			if err != nil || seen[m.Name] {
				continue
			}
			b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
			if err != nil {
				continue // exited meanwhile
			}
			seen[m.Name] = true
			if bytes.Contains(b, []byte(password)) {
				t.Errorf("%s's command line holds the password: %q", m.Name, bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
			}
		}
	}
	if r.err != nil {
		t.Fatalf("%v\nstderr:\n%s", r.err, r.stderr)
	}
	for _, w := range []string{"env-0", "env-1", "policy-0", "learner-0"} {
		if !seen[w] {
			t.Errorf("never saw %s's command line (saw %v)", w, seen)
		}
	}
	if strings.Contains(r.stdout+r.stderr, password) {
		t.Errorf("the output holds the password:\n%s\n%s", r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "dist: policy lag mean") {
		t.Errorf("no dist counters printed:\n%s", r.stdout)
	}
	// A healthy run has no silent worker.
	if !strings.Contains(r.stdout, "workers gone silent 0 (silent at the end 0)") || strings.Contains(r.stdout, " silent for ") {
		t.Errorf("a worker of a healthy run counted silent:\n%s", r.stdout)
	}
	d, ok := readSummary(t, out)["dist"].(map[string]any)
	if !ok {
		t.Fatal("summary.json has no dist counters")
	}
	for _, k := range []string{"dist/lag_mean", "dist/lag_max", "dist/dropped", "dist/duplicates", "dist/decode_errors", "dist/stale_weights", "dist/abandoned", "dist/silent_workers", "dist/silences"} {
		if _, ok := d[k]; !ok {
			t.Errorf("summary.json's dist lacks %s: %v", k, d)
		}
	}
	if d["dist/duplicates"].(float64) != 0 || d["dist/decode_errors"].(float64) != 0 {
		t.Errorf("a clean run counted duplicates or decode errors: %v", d)
	}
	b, err := os.ReadFile(filepath.Join(out, "metrics.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if head, _, _ := strings.Cut(string(b), "\n"); !strings.Contains(head, "dist/lag_mean") || !strings.Contains(head, "dist/stale_weights") {
		t.Errorf("metrics.csv header lacks the dist columns: %s", head)
	}

	// A worker started after the run ended (as an orchestrator restarts
	// whatever exits) exits 0 at once instead of failing.
	t.Setenv(launch.URLEnv, url)
	cmd := newWorkerCmdWith(testSpecs)
	var wout bytes.Buffer
	cmd.SetOut(&wout)
	cmd.SetArgs([]string{"--role", "env", "--slot", "0", "--run", "secret", "--ttl", "1s", "--wait", "5s"})
	t0 := time.Now()
	if err := cmd.ExecuteContext(ctx); err != nil {
		t.Errorf("a worker of the ended run failed: %v\n%s", err, wout.String())
	}
	if !strings.Contains(wout.String(), "has ended") || time.Since(t0) > 10*time.Second {
		t.Errorf("worker of the ended run: %q after %v", wout.String(), time.Since(t0))
	}
}
