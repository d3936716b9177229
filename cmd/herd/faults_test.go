package main

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"herd/internal/atomicfile"
	"herd/nn"
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
