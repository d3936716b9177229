package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"herd/algo"
	"herd/dist"
	"herd/internal/fakealgo"
)

// The test binary doubles as herd for the worker processes that launch
// starts: with HERD_TEST_AS_HERD=1 it runs `herd worker` over the fake
// algorithm instead of the tests (in init, before any TestMain).
func init() {
	if os.Getenv("HERD_TEST_AS_HERD") == "1" {
		root := &cobra.Command{Use: "herd", SilenceUsage: true, SilenceErrors: true}
		root.AddCommand(newWorkerCmdWith(testSpecs))
		root.SetArgs(os.Args[1:])
		if err := root.ExecuteContext(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "herd:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
}

func testSpecs() []algo.Spec { return []algo.Spec{fakealgo.Spec()} }

func writeDistConfig(t *testing.T, iters int) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "fake-dist.yaml")
	cfg := fmt.Sprintf("algo: fake\nenv: CartPole-v1\nsteps: %d\nlog_every: 128\nruntime: {executor: dist, env_workers: 2, policy_workers: 1}\nfake: {num_envs: 4, num_steps: 32}\n", iters*4*32)
	if err := os.WriteFile(p, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func launch(t *testing.T, ctx context.Context, args ...string) (string, string, error) {
	t.Helper()
	t.Setenv("HERD_TEST_AS_HERD", "1") // inherited by the worker processes only
	cmd := newLaunchCmdWith(testSpecs, []string{os.Args[0]})
	var out, errb bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(ctx)
	return out.String(), errb.String(), err
}

func readSummary(t *testing.T, dir string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// herd launch runs env, policy and learner processes over an embedded NATS
// server and writes the run directory.
func TestLaunch(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	out := filepath.Join(t.TempDir(), "run")
	stdout, stderr, err := launch(t, ctx, "--config", writeDistConfig(t, 10), "--out", out, "--quiet", "--ttl", "1s")
	if err != nil {
		t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
	for _, f := range []string{"config.yaml", "metrics.csv", "summary.json", "model.safetensors"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}
	if s := readSummary(t, out); s["steps"].(float64) != 10*4*32 {
		t.Errorf("summary steps %v", s["steps"])
	}
}

// kill -9 of an env worker mid-run: the launcher restarts it and the run
// completes.
func TestLaunchRestartsKilledWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	srv, err := dist.StartServer(dist.ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	out := filepath.Join(t.TempDir(), "run")
	type result struct {
		stdout, stderr string
		err            error
	}
	done := make(chan result, 1)
	go func() {
		o, e, err := launch(t, ctx, "--config", writeDistConfig(t, 400), "--out", out, "--quiet",
			"--nats", srv.URL(), "--run", "kill", "--ttl", "1s")
		done <- result{o, e, err}
	}()
	nc, err := nats.Connect(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	n, err := dist.NewNATS(nc)
	if err != nil {
		t.Fatal(err)
	}
	mem, err := n.Membership(ctx, "kill", dist.Options{TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	pid := 0
	for pid == 0 {
		select {
		case r := <-done:
			t.Fatalf("launch ended before the kill: %v\n%s", r.err, r.stderr)
		case <-time.After(50 * time.Millisecond):
		}
		ms, err := mem.Members(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			if m.Name == "env-0" {
				pid, _ = strconv.Atoi(string(m.Info))
			}
		}
	}
	time.Sleep(300 * time.Millisecond) // mid-run
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("%v\nstderr:\n%s", r.err, r.stderr)
	}
	if !strings.Contains(r.stderr, "env worker 0 exited") {
		t.Errorf("no restart reported; stderr:\n%s", r.stderr)
	}
	if s := readSummary(t, out); s["steps"].(float64) != 400*4*32 {
		t.Errorf("summary steps %v", s["steps"])
	}
}

// When the controller's registration disappears without a goodbye (its
// process was killed), every worker exits by itself within 2 × TTL.
func TestWorkersExitWhenControllerGone(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	srv, err := dist.StartServer(dist.ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	nc, err := nats.Connect(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	n, err := dist.NewNATS(nc)
	if err != nil {
		t.Fatal(err)
	}
	const run, ttl = "orphans", time.Second
	data, err := os.ReadFile(writeDistConfig(t, 1000))
	if err != nil {
		t.Fatal(err)
	}
	res, err := algo.Resolve(data, testSpecs(), algo.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := res.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := n.PutRunConfig(ctx, run, b); err != nil {
		t.Fatal(err)
	}
	mem, err := n.Membership(ctx, run, dist.Options{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	cctx, crash := context.WithCancel(ctx)
	if _, err := mem.Register(cctx, controllerName, nil); err != nil {
		t.Fatal(err)
	}
	var procs []*exec.Cmd
	waits := make(chan error, 2)
	for _, role := range []string{"policy", "env"} {
		cmd := exec.Command(os.Args[0], "worker", "--role", role, "--nats", srv.URL(), "--run", run, "--ttl", ttl.String())
		cmd.Env = append(os.Environ(), "HERD_TEST_AS_HERD=1")
		var eb bytes.Buffer
		cmd.Stderr = &eb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs = append(procs, cmd)
		go func() { waits <- cmd.Wait() }()
	}
	defer func() {
		for _, p := range procs {
			_ = p.Process.Kill()
		}
	}()
	for {
		ms, err := mem.Members(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) == 3 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	t0 := time.Now()
	crash() // keep-alives stop; the key expires after the TTL
	for range procs {
		select {
		case <-waits:
		case <-time.After(2*ttl + time.Second):
			t.Fatalf("a worker still runs %v after the controller died", time.Since(t0))
		}
	}
	if d := time.Since(t0); d > 2*ttl+500*time.Millisecond {
		t.Errorf("workers exited after %v, want ≤ 2 × TTL", d)
	} else {
		t.Logf("workers exited %v after the controller's keep-alives stopped", d)
	}
}

// launch --no-workers starts no process: it stores the config, waits for a
// learner registered elsewhere, and ends when that learner is gone.
func TestLaunchNoWorkers(t *testing.T) {
	srv, err := dist.StartServer(dist.ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, _, err := launch(t, ctx, "--config", writeDistConfig(t, 1), "--no-workers"); err == nil {
		t.Fatal("--no-workers without --nats was accepted")
	}
	done := make(chan error, 1)
	go func() {
		_, _, err := launch(t, ctx, "--config", writeDistConfig(t, 1), "--nats", srv.URL(), "--run", "ctl", "--no-workers", "--ttl", "1s")
		done <- err
	}()
	nc, err := nats.Connect(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	n, err := dist.NewNATS(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.RunConfig(ctx, "ctl"); err != nil {
		t.Fatalf("the controller stored no config: %v", err)
	}
	mem, err := n.Membership(ctx, "ctl", dist.Options{TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	lease, err := mem.Register(ctx, "learner-0", nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		t.Fatalf("the controller ended while the learner was alive: %v", err)
	case <-time.After(2500 * time.Millisecond): // past one poll and two TTLs
	}
	_ = lease.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("the controller did not end after the learner was gone")
	}
}
