package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"herd/transport"
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

// A second herd launch of a run ID that is active on the same NATS is
// refused up front, naming who holds it, and the first run goes on.
func TestLaunchRefusesActiveRunID(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("process groups of their own need Linux")
	}
	srv, ctx := natsRun(t, 90*time.Second)
	out := filepath.Join(t.TempDir(), "run")
	cmd, eb, waited := startLaunch(t, ctx, srv.URL(), "taken", out)
	t0 := time.Now()
	_, _, err := launchCmd(t, ctx, "--config", writeDistConfig(t, 10), "--out", filepath.Join(t.TempDir(), "second"), "--quiet",
		"--nats", srv.URL(), "--run", "taken", "--ttl", "1s")
	want := fmt.Sprintf("controller (process %d)", cmd.Process.Pid)
	if err == nil || !strings.Contains(err.Error(), "run taken is active") || !strings.Contains(err.Error(), want) {
		t.Fatalf("second launch of an active run: %v; want a refusal naming %s", err, want)
	}
	if d := time.Since(t0); d > 10*time.Second {
		t.Errorf("refusal took %v", d)
	}
	// The first run is untouched: it stops cleanly on SIGTERM, saved.
	if err := syscall.Kill(cmd.Process.Pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err = <-waited:
	case <-ctx.Done():
		t.Fatalf("the first launch did not end\n%s", eb.String())
	}
	if code := cmd.ProcessState.ExitCode(); code != exitInterrupted {
		t.Fatalf("first launch: %v (exit %d), want %d\n%s", err, code, exitInterrupted, eb.String())
	}
	if s := readSummary(t, out); s["status"] != "interrupted" {
		t.Errorf("first run's summary status %v", s["status"])
	}
}

// kill -9 of herd launch mid-run does not lose the run: its learner is
// told as on Ctrl-C and saves the run as interrupted, with the embedded
// NATS server (gone with the launcher) and with an external one.
func TestLaunchKilledLearnerSaves(t *testing.T) {
	if testing.Short() || runtime.GOOS != "linux" {
		t.Skip("starts processes; the parent-death signal needs Linux")
	}
	srv := startNATS(t, transport.ServerOptions{})
	for _, external := range []bool{false, true} {
		t.Run(fmt.Sprintf("external-nats=%v", external), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			out := filepath.Join(t.TempDir(), "run")
			var cmd *exec.Cmd
			if external {
				cmd, _, _ = startLaunch(t, ctx, srv.URL(), "killed-launcher", out)
			} else {
				cmd = exec.Command(os.Args[0], "launch", "--config", writeDistConfig(t, 100000), "--out", out, "--quiet", "--ttl", "1s")
				cmd.Env = append(os.Environ(), "HERD_TEST_AS_HERD=1")
				cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				go cmd.Wait()
				t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
				// The learner has written its first metrics rows.
				waitFor(t, "the learner's first rows", func() bool {
					b, _ := os.ReadFile(filepath.Join(out, ".staging", "metrics.csv"))
					return bytes.Count(b, []byte("\n")) > 2
				})
			}
			if err := syscall.Kill(cmd.Process.Pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			t0 := time.Now()
			for {
				if _, err := os.Stat(filepath.Join(out, "summary.json")); err == nil {
					break
				}
				select {
				case <-ctx.Done():
					ents, _ := os.ReadDir(out)
					t.Fatalf("no summary.json %v after kill -9 of the launcher; %s holds %v", time.Since(t0), out, ents)
				case <-time.After(50 * time.Millisecond):
				}
			}
			t.Logf("run saved %v after kill -9 of the launcher", time.Since(t0))
			if s := readSummary(t, out); s["status"] != "interrupted" {
				t.Errorf("summary status %v, want interrupted", s["status"])
			}
			if _, err := os.Stat(filepath.Join(out, "model.safetensors")); err != nil {
				t.Error(err)
			}
		})
	}
}

// Every Python example in the guides that pushes to the replay service
// also calls flush() (or runs the server with --durability sync): under
// the default writeback durability a push returns once queued, and an
// example that stops there teaches losing the last records.
func TestDocsPythonReplayPushFlushes(t *testing.T) {
	for _, path := range docFiles(t) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		blocks := strings.Split(string(b), "```python")
		for _, blk := range blocks[1:] {
			code, _, _ := strings.Cut(blk, "```")
			if strings.Contains(code, ".push(") && !strings.Contains(code, ".flush()") && !strings.Contains(string(b), "--durability sync") {
				t.Errorf("%s: a Python example pushes to the replay service without flush():\n%s", path, code)
			}
		}
	}
}

// A CPU profile that cannot be written (a full disk) fails the command:
// train with --cpuprofile on /dev/full, launch with its profile folder on
// a full tmpfs.
func TestCPUProfileOnFullDiskFails(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	dir := t.TempDir()
	r := herd(t, dir, "train", "--algo", "ppo", "--env", "CartPole-v1", "--steps", "256", "--quiet", "--set", "num_steps=64", "--out", "run", "--cpuprofile", "/dev/full")
	if r.code != exitFailed || !strings.Contains(r.stderr, "cpu profile") {
		t.Errorf("train --cpuprofile /dev/full: exit %d, want %d naming the profile\nstderr:\n%s", r.code, exitFailed, r.stderr)
	}
	if testing.Short() {
		return
	}
	prof := filepath.Join(t.TempDir(), "prof")
	mountTmpfs(t, prof, "4k")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	_, stderr, err := launchCmd(t, ctx, "--config", writeDistConfig(t, 10), "--out", filepath.Join(t.TempDir(), "run"), "--quiet", "--cpuprofile", prof)
	if exitCode(err) != exitFailed || !strings.Contains(err.Error(), "profile") {
		t.Errorf("launch --cpuprofile on a full disk: %v (exit %d), want %d naming the profile\nstderr:\n%s", err, exitCode(err), exitFailed, stderr)
	}
}

// bench persist stops promptly on Ctrl-C or SIGTERM, in the middle of its
// measuring loops, and exits 130, never 0.
func TestCLIBenchPersistHonoursInterrupt(t *testing.T) {
	for _, sig := range []os.Signal{os.Interrupt, syscall.SIGTERM} {
		// Without cancellation this runs for minutes (10 M reads per mode).
		// Disk first: the signal lands in its read loop, which takes
		// minutes; memory's is over within a second or two, and a check
		// between modes alone would pass there.
		cmd, so, se := start(t, t.TempDir(), "bench", "persist", "--modes", "disk,memory", "--keys", "20000", "--value-bytes", "512",
			"--reads", "10000000", "--dir", t.TempDir(), "--progress")
		waitFor(t, "the push pass", func() bool { return strings.Contains(se.String(), "push") })
		time.Sleep(300 * time.Millisecond)
		t0 := time.Now()
		if err := cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		r := finish(t, cmd, so, se, 4*time.Second) // unchecked loops took 7–25 s
		if r.code != exitInterrupted {
			t.Errorf("bench persist after %v: exit %d, want %d\nstderr:\n%s", sig, r.code, exitInterrupted, r.stderr)
		}
		t.Logf("%v: stopped %v after the signal", sig, time.Since(t0))
	}
}

// Ctrl-C of an HTS run says what happened once: no bare "context
// canceled" line per env worker.
func TestCLIHTSInterruptOneLine(t *testing.T) {
	dir := t.TempDir()
	cmd, so, se := start(t, dir, append(longPPO, "--set", "runtime.executor=hts", "--out", "run")...)
	waitFor(t, "the first metrics row", training(filepath.Join(dir, "run")))
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	r := finish(t, cmd, so, se, time.Minute)
	if r.code != exitInterrupted {
		t.Fatalf("exit %d, want %d\n%s", r.code, exitInterrupted, r.stderr)
	}
	for _, line := range strings.Split(r.stderr, "\n") {
		if strings.TrimSpace(line) == "context canceled" {
			t.Fatalf("a bare %q line on stderr:\n%s", line, r.stderr)
		}
	}
}

// The topologies a learner can lose its controller in besides the
// on-policy dist one of writeDistConfig: Ape-X (off-policy dist, the
// learner owns the replay), and the flow executor's plans (on-policy and
// Ape-X), whose learner drives the env workers' actors.
var controllerLossTopologies = []struct{ name, config string }{
	{"apex-dist", "dqn-cartpole-dist.yaml"},
	{"ppo-flow", "ppo-cartpole-flow.yaml"},
	{"apex-flow", "apex-cartpole-flow.yaml"},
}

// savedInterrupted waits (within ctx) for out's summary.json and checks
// that the run was saved as interrupted with its model.
func savedInterrupted(t *testing.T, ctx context.Context, out, after string) {
	t.Helper()
	t0 := time.Now()
	for {
		if _, err := os.Stat(filepath.Join(out, "summary.json")); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			ents, _ := os.ReadDir(out)
			t.Fatalf("no summary.json %v after %s; %s holds %v", time.Since(t0), after, out, ents)
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Logf("run saved %v after %s", time.Since(t0), after)
	if s := readSummary(t, out); s["status"] != "interrupted" {
		t.Errorf("summary status %v, want interrupted", s["status"])
	}
	if _, err := os.Stat(filepath.Join(out, "model.safetensors")); err != nil {
		t.Error(err)
	}
}

// kill -9 of herd launch saves the run in every topology, not only the
// on-policy dist one of TestLaunchKilledLearnerSaves.
func TestLaunchKilledLearnerSavesEveryTopology(t *testing.T) {
	if testing.Short() || runtime.GOOS != "linux" {
		t.Skip("starts processes; the parent-death signal needs Linux")
	}
	for _, tp := range controllerLossTopologies {
		t.Run(tp.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			out := filepath.Join(t.TempDir(), "run")
			cmd := exec.Command(os.Args[0], "launch", "--config", filepath.Join("..", "..", "configs", tp.config), "--out", out, "--quiet",
				"--ttl", "1s", "--set", "runtime.env_workers=2")
			cmd.Env = append(os.Environ(), "HERD_TEST_AS_HERD=1")
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			go cmd.Wait()
			t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
			waitFor(t, "the learner's first rows", training(out))
			if err := syscall.Kill(cmd.Process.Pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			savedInterrupted(t, ctx, out, "kill -9 of the launcher")
		})
	}
}

// A learner whose controller's registration vanishes (a --no-workers
// controller killed, the launcher's host lost: no parent-death signal)
// saves the run as interrupted and exits 1 in every topology, as
// TestLearnerAndControllerExitCodes shows for the on-policy dist one.
func TestLearnerSavesWithoutControllerEveryTopology(t *testing.T) {
	srv, _ := natsRun(t, time.Minute)
	n, err := dialNATS(t, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range controllerLossTopologies {
		t.Run(tp.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			run := "orphan-" + tp.name
			b, err := os.ReadFile(filepath.Join("..", "..", "configs", tp.config))
			if err != nil {
				t.Fatal(err)
			}
			cfg := filepath.Join(t.TempDir(), "config.yaml")
			if err := os.WriteFile(cfg, []byte(strings.Replace(string(b), "env_workers: 4", "env_workers: 2", 1)), 0o644); err != nil {
				t.Fatal(err)
			}
			putRunConfig(t, ctx, n, run, cfg)
			mem := watchRun(t, ctx, srv.URL(), run)
			cctx, crash := context.WithCancel(ctx)
			defer crash()
			if _, err := mem.Register(cctx, "controller", nil); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(t.TempDir(), "run")
			var learner *exec.Cmd
			var lerr bytes.Buffer
			for _, w := range [][]string{{"learner", "0"}, {"env", "0"}, {"env", "1"}} {
				cmd := exec.Command(os.Args[0], "worker", "--role", w[0], "--slot", w[1], "--nats", srv.URL(), "--run", run, "--ttl", "1s", "--out", out, "--quiet")
				cmd.Env = append(os.Environ(), "HERD_TEST_AS_HERD=1")
				if learner == nil {
					learner, cmd.Stderr = cmd, &lerr
				}
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
			}
			waitFor(t, "the learner's first rows", training(out))
			crash() // keep-alives stop; the registration expires after its TTL
			savedInterrupted(t, ctx, out, "the controller's keep-alives stopped")
			werr := make(chan error, 1)
			go func() { werr <- learner.Wait() }()
			select {
			case <-werr:
			case <-ctx.Done():
				t.Fatal("the learner did not exit")
			}
			if code := learner.ProcessState.ExitCode(); code != exitFailed {
				t.Errorf("learner without controller: exit status %d, want %d\nstderr:\n%s", code, exitFailed, lerr.String())
			}
		})
	}
}
