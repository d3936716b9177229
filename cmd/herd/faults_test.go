package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"herd/internal/atomicfile"
	"herd/nn"
	"herd/replay/persist"
	"herd/transport"
)

// A checkpoint whose weights are all NaN is refused by eval with the
// reason, instead of scoring a policy that cannot act.
func TestCLIEvalRefusesNonFiniteWeights(t *testing.T) {
	dir := t.TempDir()
	if r := herd(t, dir, "train", "--algo", "ppo", "--env", "CartPole-v1", "--steps", "256", "--quiet", "--set", "num_steps=64", "--out", "run"); r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	path := filepath.Join(dir, "run", "model.safetensors")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ck, err := nn.ReadSafetensors(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	for _, tn := range ck.Tensors {
		for i := range tn.Data {
			tn.Data[i] = float32(math.NaN())
		}
	}
	var buf bytes.Buffer
	if err := nn.WriteSafetensors(&buf, ck.Tensors, ck.Metadata); err != nil {
		t.Fatal(err)
	}
	if err := atomicfile.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	r := herd(t, dir, "eval", "--run", "run", "--episodes", "2")
	if r.code != exitFailed || !strings.Contains(r.stderr, "not finite") {
		t.Fatalf("eval of NaN weights: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
}

// A group command given an unknown or no subcommand fails instead of
// printing its help and exiting 0; a server stopped by Ctrl-C exits 130.
func TestCLIUnknownSubcommandAndServeInterrupt(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{{"bench", "bogus"}, {"serve", "bogus"}, {"bench", "remote", "bogus"}, {"serve"}} {
		if r := herd(t, dir, args...); r.code != exitFailed || !strings.Contains(r.stderr, "command") {
			t.Errorf("herd %v: exit %d, stderr %q", args, r.code, r.stderr)
		}
	}
	for _, args := range [][]string{{"serve", "env", "--addr", "127.0.0.1:0"}, {"serve", "replay", "--mode", "memory", "--addr", "127.0.0.1:0"}} {
		cmd, so, se := start(t, dir, args...)
		waitFor(t, "serving", func() bool { return strings.Contains(so.String(), "serving") })
		if err := cmd.Process.Signal(os.Interrupt); err != nil {
			t.Fatal(err)
		}
		if r := finish(t, cmd, so, se, time.Minute); r.code != exitInterrupted {
			t.Errorf("herd %v after Ctrl-C: exit %d, want %d\n%s", args, r.code, exitInterrupted, r.stderr)
		}
	}
}

// An explicit zero, negative or out-of-range count is an error naming the
// flag or key; only a value left out means the default.
func TestExplicitInvalidValuesAreErrors(t *testing.T) {
	dir := t.TempDir()
	srv := startNATS(t, transport.ServerOptions{})
	n, err := dialNATS(t, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	putRunConfig(t, context.Background(), n, "slots", distPPO)
	pal := []string{"train", "--algo", "dqn", "--env", "CartPole-v1", "--steps", "1000", "--quiet", "--out", filepath.Join(dir, "x"), "--set", "runtime.executor=pal"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{append(pal, "--set", "runtime.actors=0"), "runtime.actors"},
		{append(pal, "--set", "runtime.learners=-1"), "runtime.learners"},
		{[]string{"train", "--algo", "ppo", "--env", "CartPole-v1", "--set", "runtime.executor=hts", "--set", "runtime.policy_workers=0"}, "runtime.policy_workers"},
		{[]string{"launch", "--config", distPPO, "--ttl", "0s"}, "--ttl"},
		{[]string{"launch", "--config", distPPO, "--ttl", "-1s"}, "--ttl"},
		{[]string{"launch", "--config", distPPO, "--max-restarts", "-1"}, "--max-restarts"},
		{[]string{"launch", "--config", distPPO, "--restart-window", "-1s"}, "--restart-window"},
		{[]string{"launch", "--config", distPPO, "--restart-window", "0s"}, "--restart-window"},
		{[]string{"serve", "env", "--addr", "127.0.0.1:0", "--shm", "a/b"}, "shm name"},
		{[]string{"serve", "replay", "--addr", "127.0.0.1:0", "--dir", distPPO}, distPPO + " is not a directory"},
		{[]string{"serve", "replay", "--mode", "memory", "--max-batch", "0"}, "--max-batch"},
		{[]string{"serve", "replay", "--mode", "memory", "--cache-mb", "0"}, "--cache-mb"},
		{[]string{"serve", "env", "--max-sessions", "0"}, "--max-sessions"},
		{[]string{"bench", "remote", "replay", "--ops", "0"}, "--ops"},
		{[]string{"worker", "--role", "env", "--slot", "99", "--nats", srv.URL(), "--run", "slots", "--wait", "5s"}, "--slot 99"},
		{[]string{"worker", "--role", "env", "--nats", srv.URL(), "--run", "slots", "--wait", "-1s"}, "--wait"},
	} {
		// A server that accepted the value would serve until stopped.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		root := newRootCmd()
		root.SetOut(io.Discard)
		root.SetErr(io.Discard)
		root.SetArgs(c.args)
		err := root.ExecuteContext(ctx)
		cancel()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("herd %v: %v, want an error naming %s", c.args, err, c.want)
		}
	}
}

// Worker counts are checked against the memory estimate and the machine
// before anything starts: no process, no goroutine per worker.
func TestWorkerCountsBounded(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Now()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"train", "--algo", "dqn", "--env", "CartPole-v1", "--steps", "1000", "--quiet", "--out", filepath.Join(dir, "a"),
			"--set", "runtime.executor=pal", "--set", "runtime.actors=1000000000"}, "runtime.actors"},
		{[]string{"train", "--config", distPPO, "--quiet", "--out", filepath.Join(dir, "b"), "--set", "runtime.env_workers=1000000000"}, "runtime.env_workers"},
		{[]string{"launch", "--config", distPPO, "--quiet", "--out", filepath.Join(dir, "c"), "--set", "runtime.env_workers=1000000"}, "env_workers"},
		{[]string{"launch", "--config", distPPO, "--quiet", "--out", filepath.Join(dir, "d"), "--set", "runtime.env_workers=4000"}, "worker processes"},
	} {
		if _, err := runHerd(t, c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("herd %v: %v, want an error naming %s", c.args, err, c.want)
		}
	}
	if d := time.Since(t0); d > 20*time.Second {
		t.Errorf("refusals took %v", d)
	}
	// bench env checks --num-envs against the memory before making envs.
	if _, err := runHerd(t, "bench", "env", "--envs", "CartPole-v1", "--num-envs", "1000000000", "--duration", "10ms", "--repeats", "1"); err == nil || !strings.Contains(err.Error(), "--num-envs") {
		t.Errorf("bench env --num-envs 1e9: %v, want the memory estimate naming --num-envs", err)
	}
	// A pal run whose actors' envs exceed the memory is refused by the
	// estimate, naming runtime.actors.
	if _, err := runHerd(t, "train", "--algo", "dqn", "--env", "CartPole-v1", "--steps", "1000", "--quiet", "--out", filepath.Join(dir, "e"),
		"--set", "runtime.executor=pal", "--set", "runtime.actors=4096", "--set", "num_envs=1000000"); err == nil || !strings.Contains(err.Error(), "runtime.actors") {
		t.Errorf("4096 actors × 1e6 envs: %v, want the memory estimate naming runtime.actors", err)
	}
}

const distPPO = "../../configs/ppo-cartpole-dist.yaml"

// serve replay --restore-from says which snapshot it restored, and why the
// newer ones were skipped, instead of rolling back silently.
func TestServeReplaySaysWhichSnapshot(t *testing.T) {
	dir := t.TempDir()
	url := "file://" + filepath.ToSlash(dir)
	src, err := persist.Open(context.Background(), persist.Options{Mode: persist.Memory, SnapshotURL: url, SnapshotEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 600 {
		if err := src.Push(context.Background(), fmt.Sprintf("k%04d", i), persist.Record{Value: []byte("v")}); err != nil {
			t.Fatal(err)
		}
		if i == 399 || i == 599 {
			if _, err := src.Snapshot(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
	src.Close()
	manifests, _ := filepath.Glob(filepath.Join(dir, "snapshots", "*", "*"))
	slices.Sort(manifests)
	if len(manifests) < 2 {
		t.Fatalf("manifests: %v", manifests)
	}
	newest := manifests[len(manifests)-1]
	b, err := os.ReadFile(newest)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(newest, b[:len(b)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	root := newRootCmd()
	var errb lockedBuffer
	pr, pw := io.Pipe()
	root.SetOut(pw)
	root.SetErr(&errb)
	root.SetArgs([]string{"serve", "replay", "--mode", "memory", "--restore-from", url, "--addr", "127.0.0.1:0"})
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx); pw.Close() }()
	go io.Copy(io.Discard, pr)
	waitFor(t, "the restore report", func() bool { return strings.Contains(errb.String(), "restored snapshot") })
	cancel()
	<-done
	out := errb.String()
	if !strings.Contains(out, "restored snapshot 1 ") || !strings.Contains(out, "(400 records)") ||
		!strings.Contains(out, "newer snapshot(s) up to 2 were skipped") {
		t.Fatalf("stderr does not say which snapshot was restored and why:\n%s", out)
	}
}

// Messages say what to change: a tune budget too short for its cores, a
// negative worker wait.
func TestClearMessages(t *testing.T) {
	_, err := runHerd(t, "tune", "--config", "../../configs/dqn-cartpole-pal.yaml", "--cores", "1024", "--budget", "1s", "--out", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "--budget") || strings.Contains(err.Error(), "made no update") {
		t.Errorf("tune --cores 1024 --budget 1s: %v", err)
	}
}
