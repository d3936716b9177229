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

	"github.com/nats-io/nats.go"

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
	srv, err := transport.StartServer(transport.ServerOptions{User: "herd", Password: password})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	url := strings.Replace(srv.URL(), "nats://", "nats://herd:"+password+"@", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	out := filepath.Join(t.TempDir(), "run")
	type result struct {
		stdout, stderr string
		err            error
	}
	done := make(chan result, 1)
	go func() {
		o, e, err := launch(t, ctx, "--config", writeDistConfig(t, 60), "--out", out, "--quiet",
			"--nats", url, "--run", "secret", "--ttl", "1s")
		done <- result{o, e, err}
	}()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	n, err := transport.NewNATS(nc)
	if err != nil {
		t.Fatal(err)
	}
	mem, err := n.Membership(ctx, "secret", transport.Options{TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	seen := map[string]bool{}
	var r result
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
	d, ok := readSummary(t, out)["dist"].(map[string]any)
	if !ok {
		t.Fatal("summary.json has no dist counters")
	}
	for _, k := range []string{"dist/lag_mean", "dist/lag_max", "dist/dropped", "dist/duplicates", "dist/decode_errors", "dist/stale_weights", "dist/abandoned"} {
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
	t.Setenv(natsURLEnv, url)
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

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"nats://u:p@h:4222":                 "nats://***@h:4222",
		"nats://tok@h:4222,nats://a:b@g:1":  "nats://***@h:4222,nats://***@g:1",
		"nats://h:4222":                     "nats://h:4222",
		"u:p@h:4222":                        "***@h:4222",
		"tls://user:p%40ss@host.example:42": "tls://***@host.example:42",
	} {
		if got := redactURL(in); got != want {
			t.Errorf("redactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestRestartBudgetWindow: the restart budget counts failures within the
// window, so failures spread over a long run never exhaust it, while a
// burst does.
func TestRestartBudgetWindow(t *testing.T) {
	b := restartBudget{max: 3, window: 10 * time.Minute}
	t0 := time.Unix(0, 0)
	for i := range 20 { // one failure every 5 minutes: at most 3 in any window
		if n, over := b.fail(t0.Add(time.Duration(i) * 5 * time.Minute)); over || n > 3 {
			t.Fatalf("failure %d (5 min apart): %d in the window, over %v", i, n, over)
		}
	}
	burst := t0.Add(200 * time.Minute)
	for i := range 4 {
		n, over := b.fail(burst.Add(time.Duration(i) * time.Second))
		if over != (i == 3) {
			t.Fatalf("burst failure %d: %d in the window, over %v", i, n, over)
		}
	}
}

// The run's end mark carries the learner's exit status, which a
// --no-workers controller exits with: a completed, an interrupted and a
// failed learner, and the controller's own mark (no learner result).
func TestEndMark(t *testing.T) {
	for _, c := range []struct {
		err  error
		code int
	}{{nil, exitOK}, {context.Canceled, exitInterrupted}, {os.ErrNotExist, exitFailed}} {
		code, msg, ok := parseEndMark(endMark(c.err))
		if !ok || code != c.code || (c.err != nil && msg != c.err.Error()) {
			t.Errorf("endMark(%v) reads back as %d %q %v, want %d", c.err, code, msg, ok, c.code)
		}
	}
	if _, _, ok := parseEndMark(controllerEndMark); ok {
		t.Error("the controller's end mark reads as a learner's result")
	}
	if d := describeEnd(endMark(nil)); d != "completed" {
		t.Errorf("describeEnd(completed) = %q", d)
	}
}
