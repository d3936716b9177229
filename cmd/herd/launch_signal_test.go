package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"herd/launch"
	"herd/transport"
)

// startLaunch starts `herd launch` (the test binary doubling as herd) in a
// process group of its own, as a shell runs a command in a terminal, over
// the NATS server url, and returns once the learner has registered.
func startLaunch(t *testing.T, ctx context.Context, url, run, out string) (*exec.Cmd, *bytes.Buffer, chan error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "launch", "--config", writeDistConfig(t, 100000), "--out", out, "--quiet",
		"--nats", url, "--run", run, "--ttl", "1s")
	cmd.Env = append(os.Environ(), "HERD_TEST_AS_HERD=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var eb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &eb, &eb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	mem := watchRun(t, ctx, url, run)
	for {
		ms, err := mem.Members(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			if m.Name == "learner-0" {
				time.Sleep(500 * time.Millisecond) // mid-run
				return cmd, &eb, waited
			}
		}
		select {
		case err := <-waited:
			t.Fatalf("launch ended before the learner registered: %v\n%s", err, eb.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// A Ctrl-C in the terminal (SIGINT to the launcher's whole process group)
// or a SIGTERM to the launcher alone stops the run once: the learner saves
// the interrupted run, and launch exits 130.
func TestLaunchInterruptSavesAndExits130(t *testing.T) {
	if testing.Short() || runtime.GOOS != "linux" {
		t.Skip("starts processes; process groups of their own need Linux")
	}
	srv := startNATS(t, transport.ServerOptions{})
	for _, tc := range []struct {
		name  string
		group bool
		sig   syscall.Signal
	}{{"terminal-ctrl-c", true, syscall.SIGINT}, {"sigterm", false, syscall.SIGTERM}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			out := filepath.Join(t.TempDir(), "run")
			cmd, eb, waited := startLaunch(t, ctx, srv.URL(), "sig-"+tc.name, out)
			pid := cmd.Process.Pid
			if tc.group {
				pid = -pid
			}
			if err := syscall.Kill(pid, tc.sig); err != nil {
				t.Fatal(err)
			}
			var err error
			select {
			case err = <-waited:
			case <-ctx.Done():
				t.Fatalf("launch did not end\n%s", eb.String())
			}
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != exitInterrupted {
				t.Fatalf("launch ended with %v, want exit status %d\n%s", err, exitInterrupted, eb.String())
			}
			if strings.Contains(eb.String(), "again: exiting at once") {
				t.Errorf("a process got a second signal:\n%s", eb.String())
			}
			if s := readSummary(t, out); s["status"] != "interrupted" {
				t.Errorf("summary status %v, want interrupted", s["status"])
			}
			if _, err := os.Stat(filepath.Join(out, "model.safetensors")); err != nil {
				t.Error(err)
			}
		})
	}
}

// A learner whose controller vanishes mid-run saves the run as interrupted
// and exits with a failure (the run is not finished), and a --no-workers
// controller whose learner vanishes without a result, and does not come
// back within --register-timeout, fails.
func TestLearnerAndControllerExitCodes(t *testing.T) {
	srv, ctx := natsRun(t, 60*time.Second)

	// Learner: its controller is killed.
	n, err := dialNATS(t, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	const run = "orphan-learner"
	putRunConfig(t, ctx, n, run, writeDistConfig(t, 100000))
	mem := watchRun(t, ctx, srv.URL(), run)
	cctx, crash := context.WithCancel(ctx)
	defer crash()
	if _, err := mem.Register(cctx, launch.ControllerName, nil); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "run")
	var procs []*exec.Cmd
	for _, role := range []string{"learner", "policy", "env"} {
		cmd := exec.Command(os.Args[0], "worker", "--role", role, "--nats", srv.URL(), "--run", run, "--ttl", "1s", "--out", out, "--quiet")
		cmd.Env = append(os.Environ(), "HERD_TEST_AS_HERD=1")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs = append(procs, cmd)
		t.Cleanup(func() { _ = cmd.Process.Kill() })
	}
	for {
		ms, err := mem.Members(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) == 4 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	crash()
	for i, p := range procs {
		err := p.Wait()
		code := p.ProcessState.ExitCode()
		if i == 0 && code != exitFailed {
			t.Errorf("learner without controller: exit status %d (%v), want %d", code, err, exitFailed)
		}
		if i > 0 && code != exitOK {
			t.Errorf("worker %d without controller: exit status %d, want 0", i, code)
		}
	}
	if s := readSummary(t, out); s["status"] != "interrupted" {
		t.Errorf("learner's summary status %v, want interrupted", s["status"])
	}

	// Controller: its learner is killed (its registration expires).
	done := make(chan error, 1)
	go func() {
		_, _, err := launchCmd(t, ctx, "--config", writeDistConfig(t, 1), "--nats", srv.URL(), "--run", "ctl-killed", "--no-workers", "--ttl", "1s",
			"--register-timeout", "3s") // how long it waits for the learner to come back
		done <- err
	}()
	if _, err := n.RunConfig(ctx, "ctl-killed"); err != nil {
		t.Fatal(err)
	}
	mem2 := watchRun(t, ctx, srv.URL(), "ctl-killed")
	lctx, kill := context.WithCancel(ctx)
	if _, err := mem2.Register(lctx, "learner-0", nil); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // past one poll
	kill()
	select {
	case err := <-done:
		if err == nil || exitCode(err) != exitFailed || !strings.Contains(err.Error(), "without a result") {
			t.Fatalf("controller after its learner was killed: %v, want a failure", err)
		}
	case <-ctx.Done():
		t.Fatal("the controller did not end after the learner was gone")
	}
}
