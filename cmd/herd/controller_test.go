package main

import (
	"bytes"
	"context"
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

// proc is a herd process (the test binary doubling as herd) in a process
// group of its own.
type proc struct {
	cmd    *exec.Cmd
	out    *bytes.Buffer
	waited chan struct{}
}

func startHerd(t *testing.T, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(os.Args[0], args...), out: &bytes.Buffer{}, waited: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), "HERD_TEST_AS_HERD=1")
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.waited) }()
	t.Cleanup(func() { _ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL); <-p.waited })
	return p
}

// exit waits for p's exit status, failing the test after d.
func (p *proc) exit(t *testing.T, what string, d time.Duration) int {
	t.Helper()
	select {
	case <-p.waited:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(d):
		t.Fatalf("%s did not exit within %v\n%s", what, d, p.out.String())
		return 0
	}
}

// controllerRun starts a --no-workers controller for run over url and
// returns it once the run's config is stored.
func controllerRun(t *testing.T, ctx context.Context, url, run string, extra ...string) *proc {
	t.Helper()
	return controllerRunConfig(t, ctx, writeDistConfig(t, 100000), url, run, extra...)
}

// controllerRunConfig is controllerRun of the config at cfg.
func controllerRunConfig(t *testing.T, ctx context.Context, cfg, url, run string, extra ...string) *proc {
	t.Helper()
	args := append([]string{"launch", "--config", cfg, "--nats", url, "--run", run, "--no-workers", "--ttl", "3s"}, extra...)
	c := startHerd(t, args...)
	n, err := dialNATS(t, url)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.RunConfig(ctx, run); err != nil {
		t.Fatal(err)
	}
	return c
}

// awaitMember waits until name is registered in run.
func awaitMember(t *testing.T, ctx context.Context, mem transport.Membership, name string) {
	t.Helper()
	for {
		ms, err := mem.Members(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			if m.Name == name {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A --no-workers controller's exit tells the truth about its learner: no
// learner within --register-timeout fails (not a wait forever); a learner
// restarted after a kill -9 resumes the run and the controller exits 0 with
// it, while one never restarted fails the controller after
// --register-timeout; a Ctrl-C gives 130 because the learner saved the
// run (its exit is 130).
func TestControllerExitIsTheLearners(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("process groups of their own need Linux")
	}
	srv, ctx := natsRun(t, 90*time.Second)
	url := srv.URL()

	t.Run("no-learner", func(t *testing.T) {
		c := controllerRun(t, ctx, url, "ctl-none", "--register-timeout", "2s")
		if code := c.exit(t, "the controller", 15*time.Second); code != exitFailed || !strings.Contains(c.out.String(), "no learner registered within 2s") {
			t.Errorf("controller without a learner: exit %d, want %d naming the timeout\n%s", code, exitFailed, c.out.String())
		}
	})

	workers := func(t *testing.T, run, out string) (learnerArgs []string) {
		learnerArgs = []string{"worker", "--role", "learner", "--nats", url, "--run", run, "--ttl", "3s", "--out", out, "--quiet"}
		for _, role := range []string{"policy", "env"} {
			startHerd(t, "worker", "--role", role, "--nats", url, "--run", run, "--ttl", "3s")
		}
		return learnerArgs
	}

	t.Run("restarted-learner", func(t *testing.T) {
		const run, iters = "ctl-restart", 400
		out := filepath.Join(t.TempDir(), "run")
		c := controllerRunConfig(t, ctx, writeResumeConfig(t, iters, 16), url, run)
		mem := watchRun(t, ctx, url, run)
		largs := []string{"worker", "--role", "learner", "--nats", url, "--run", run, "--ttl", "3s", "--out", out, "--quiet"}
		for _, slot := range []string{"0", "1"} {
			startHerd(t, "worker", "--role", "env", "--slot", slot, "--nats", url, "--run", run, "--ttl", "3s")
		}
		l := startHerd(t, largs...)
		awaitMember(t, ctx, mem, "learner-0")
		awaitCheckpoint(t, ctx, out)
		if err := syscall.Kill(l.cmd.Process.Pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		l.exit(t, "the killed learner", 10*time.Second)
		// An orchestrator's restart (compose's restart: on-failure), at
		// once: the killed learner's registration has not expired yet.
		l2 := startHerd(t, largs...)
		if code := l2.exit(t, "the restarted learner", 60*time.Second); code != exitOK || !strings.Contains(l2.out.String(), "resuming from step") {
			t.Errorf("restarted learner: exit %d, want %d after resuming\n%s", code, exitOK, l2.out.String())
		}
		if code := c.exit(t, "the controller", 20*time.Second); code != exitOK {
			t.Errorf("controller: exit %d, want %d\n%s", code, exitOK, c.out.String())
		}
		checkResumed(t, out, iters)
		// The next restart finds the run ended: exit 0, so an orchestrator
		// stops restarting it.
		l3 := startHerd(t, largs...)
		if code := l3.exit(t, "the learner started after the end", 20*time.Second); code != exitOK || !strings.Contains(l3.out.String(), "nothing to do") {
			t.Errorf("learner after the end: exit %d, want 0\n%s", code, l3.out.String())
		}
	})

	t.Run("learner-killed-for-good", func(t *testing.T) {
		// No restart: the controller waits --register-timeout for one,
		// then fails naming the loss.
		const run = "ctl-lost"
		out := filepath.Join(t.TempDir(), "run")
		c := controllerRunConfig(t, ctx, writeResumeConfig(t, 400, 16), url, run, "--register-timeout", "2s")
		mem := watchRun(t, ctx, url, run)
		for _, slot := range []string{"0", "1"} {
			startHerd(t, "worker", "--role", "env", "--slot", slot, "--nats", url, "--run", run, "--ttl", "3s")
		}
		l := startHerd(t, "worker", "--role", "learner", "--nats", url, "--run", run, "--ttl", "3s", "--out", out, "--quiet")
		awaitMember(t, ctx, mem, "learner-0")
		if err := syscall.Kill(l.cmd.Process.Pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		if code := c.exit(t, "the controller", 30*time.Second); code != exitFailed || !strings.Contains(c.out.String(), "did not restart within 2s") {
			t.Errorf("controller after a learner lost for good: exit %d, want %d naming it\n%s", code, exitFailed, c.out.String())
		}
	})

	t.Run("ctrl-c", func(t *testing.T) {
		const run = "ctl-int"
		out := filepath.Join(t.TempDir(), "run")
		c := controllerRun(t, ctx, url, run)
		mem := watchRun(t, ctx, url, run)
		l := startHerd(t, workers(t, run, out)...)
		awaitMember(t, ctx, mem, "learner-0")
		time.Sleep(500 * time.Millisecond)
		if err := syscall.Kill(-c.cmd.Process.Pid, syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		code := c.exit(t, "the controller", 30*time.Second)
		lcode := l.exit(t, "the learner", 30*time.Second)
		if code != exitInterrupted || lcode != exitInterrupted {
			t.Errorf("Ctrl-C: controller exit %d, learner exit %d, want both %d\ncontroller:\n%s\nlearner:\n%s", code, lcode, exitInterrupted, c.out.String(), l.out.String())
		}
		if s := readSummary(t, out); s["status"] != "interrupted" {
			t.Errorf("summary status %v, want interrupted", s["status"])
		}
	})
}
