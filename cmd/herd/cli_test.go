package main

import (
	"bytes"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"herd/metrics"
	"herd/nn"
)

// These tests build the real binary and check what a user sees: the exit
// status, the messages and the files left behind (issue 11).

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// herdBin builds cmd/herd once per test process.
func herdBin(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the herd binary")
	}
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "herd-cli-test")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "herd")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			binErr = errors.New(string(out))
		}
	})
	if binErr != nil {
		t.Fatalf("go build: %v", binErr)
	}
	return binPath
}

type result struct {
	code           int
	stdout, stderr string
}

// lockedBuffer is an output buffer the test may read while the process
// still writes to it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// start runs herd with args in dir without waiting.
func start(t *testing.T, dir string, args ...string) (*exec.Cmd, *lockedBuffer, *lockedBuffer) {
	t.Helper()
	cmd := exec.Command(herdBin(t), args...)
	cmd.Dir = dir
	var so, se lockedBuffer
	cmd.Stdout, cmd.Stderr = &so, &se
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, &so, &se
}

// finish waits for cmd, killing it after limit.
func finish(t *testing.T, cmd *exec.Cmd, so, se *lockedBuffer, limit time.Duration) result {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(limit):
		cmd.Process.Kill()
		<-done
		t.Fatalf("%v still running after %v\nstdout:\n%s\nstderr:\n%s", cmd.Args, limit, so, se)
	}
	return result{cmd.ProcessState.ExitCode(), so.String(), se.String()}
}

func herd(t *testing.T, dir string, args ...string) result {
	t.Helper()
	cmd, so, se := start(t, dir, args...)
	return finish(t, cmd, so, se, 2*time.Minute)
}

// waitFor polls (sleeping, not spinning) until cond holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// training reports whether the run writing into out has written a first
// metrics row (into its staging directory).
func training(out string) func() bool {
	return func() bool {
		b, err := os.ReadFile(filepath.Join(out, ".staging", "metrics.csv"))
		return err == nil && bytes.Count(b, []byte("\n")) >= 2
	}
}

var longPPO = []string{"train", "--algo", "ppo", "--env", "CartPole-v1", "--steps", "50000000", "--quiet",
	"--log-every", "512", "--set", "num_steps=64"}

func TestCLIInterruptSavesAndExits130(t *testing.T) {
	dir := t.TempDir()
	cmd, so, se := start(t, dir, append(longPPO, "--out", "run")...)
	waitFor(t, "training to start", training(filepath.Join(dir, "run")))
	cmd.Process.Signal(os.Interrupt)
	r := finish(t, cmd, so, se, time.Minute)
	if r.code != 130 || !strings.Contains(r.stdout, "checkpoint and metrics saved") {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	s, err := metrics.ReadSummary(filepath.Join(dir, "run", "summary.json"))
	if err != nil || s.Status != metrics.StatusInterrupted || !s.Interrupted {
		t.Fatalf("summary %+v, %v", s, err)
	}
	for _, f := range []string{"config.yaml", "metrics.csv", "curve.png", "model.safetensors"} {
		if _, err := os.Stat(filepath.Join(dir, "run", f)); err != nil {
			t.Errorf("missing %s", f)
		}
	}
}

func TestCLIInterruptWithFailedSaveIsAFailure(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "run", "model.safetensors", "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	// Without --force the directory counts as a run and is refused at once.
	if r := herd(t, dir, append(longPPO, "--out", "run")...); r.code != 1 || !strings.Contains(r.stderr, "already holds a run") {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	// A disk too small for the checkpoint: the interrupted run cannot be
	// saved. (A directory in the model's place no longer fails the save:
	// --force sets the earlier run's files aside.)
	if err := os.RemoveAll(filepath.Join(dir, "run")); err != nil {
		t.Fatal(err)
	}
	mountTmpfs(t, filepath.Join(dir, "run"), "48k")
	cmd, so, se := start(t, dir, append(longPPO, "--out", "run", "--force")...)
	waitFor(t, "training to start", training(filepath.Join(dir, "run")))
	cmd.Process.Signal(os.Interrupt)
	r := finish(t, cmd, so, se, time.Minute)
	if r.code != 1 || strings.Contains(r.stdout, "saved in") || !strings.Contains(r.stderr, "not everything was saved") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
}

// A second Ctrl-C exits at once even when the command cannot stop: here it
// blocks writing its CPU profile, at the end of the run, into a FIFO whose
// pipe the test has filled (opening a FIFO read-write never blocks, and a
// profile smaller than the pipe would go through).
func TestCLISecondInterruptExitsAtOnce(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	fd, err := syscall.Open(fifo, syscall.O_RDWR|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	for chunk := make([]byte, 4096); ; {
		if _, err := syscall.Write(fd, chunk); err != nil {
			if err != syscall.EAGAIN {
				t.Fatal(err)
			}
			break
		}
	}
	cmd, so, se := start(t, dir, append(longPPO, "--out", "run", "--cpuprofile", fifo)...)
	time.Sleep(500 * time.Millisecond) // let it install its handler and block in open
	cmd.Process.Signal(os.Interrupt)
	waitFor(t, "the first interrupt to be seen", func() bool { return strings.Contains(se.String(), "interrupt again") })
	cmd.Process.Signal(os.Interrupt)
	r := finish(t, cmd, so, se, 10*time.Second)
	if r.code != 1 || !strings.Contains(r.stderr, "exiting at once") {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
}

func TestCLIBenchNNHonoursInterrupt(t *testing.T) {
	// Without cancellation this runs for minutes (3 s × 5 repeats × ops × backends).
	cmd, so, se := start(t, t.TempDir(), "bench", "nn", "--nets", "256-256", "--batches", "1024", "--min-time", "3s", "--repeats", "5")
	time.Sleep(time.Second)
	cmd.Process.Signal(os.Interrupt)
	if r := finish(t, cmd, so, se, 20*time.Second); r.code != 130 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
}

func TestCLIFailedRunLeavesEarlierRunUntouched(t *testing.T) {
	dir := t.TempDir()
	small := []string{"train", "--algo", "ppo", "--env", "CartPole-v1", "--steps", "512", "--quiet", "--set", "num_steps=64", "--out", "run"}
	if r := herd(t, dir, small...); r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	snapshot := func() map[string]string {
		m := map[string]string{}
		for _, f := range []string{"config.yaml", "metrics.csv", "summary.json", "curve.png", "model.safetensors"} {
			b, _ := os.ReadFile(filepath.Join(dir, "run", f))
			m[f] = string(b)
		}
		return m
	}
	before := snapshot()
	for _, args := range [][]string{
		{"--env", "CartPole-v9", "--force"},        // unknown env
		{"--set", "learning_rate=.inf", "--force"}, // non-finite setting
		{"--set", "buffer_size=1"},                 // a key PPO does not have
		{},                                         // no --force
		{"--resume", "--set", "learning_rate=1e-3"},   // a setting changed
		{"--resume", "--set", "runtime.executor=hts"}, // another executor: a changed setting
	} {
		r := herd(t, dir, append(small, args...)...)
		if r.code != 1 {
			t.Errorf("%v: exit %d, want 1\n%s", args, r.code, r.stderr)
		}
		if after := snapshot(); !equalMaps(before, after) {
			t.Fatalf("%v changed the earlier run", args)
		}
	}
	if r := herd(t, dir, append(small, "--resume", "--set", "learning_rate=1e-3")...); !strings.Contains(r.stderr, "cannot resume") ||
		!strings.Contains(r.stderr, "ppo.learning_rate 0.00025 (this run: 0.001)") {
		t.Errorf("--resume with another learning rate: %s", r.stderr)
	}
	if r := herd(t, dir, append(small, "--resume", "--set", "runtime.executor=hts")...); !strings.Contains(r.stderr, "cannot resume") ||
		!strings.Contains(r.stderr, "runtime.executor") {
		t.Errorf("--resume under hts: %s", r.stderr)
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestCLIConcurrentRunsIntoOneDirectory(t *testing.T) {
	dir := t.TempDir()
	cmd, so, se := start(t, dir, append(longPPO, "--out", "run")...)
	waitFor(t, "training to start", training(filepath.Join(dir, "run")))
	r := herd(t, dir, append(longPPO, "--out", "run", "--force")...)
	if r.code != 1 || !strings.Contains(r.stderr, "in use by another process") {
		t.Errorf("second run: exit %d\n%s", r.code, r.stderr)
	}
	cmd.Process.Signal(os.Interrupt)
	if r := finish(t, cmd, so, se, time.Minute); r.code != 130 {
		t.Fatalf("first run: exit %d\n%s", r.code, r.stderr)
	}
}

func TestCLIDivergence(t *testing.T) {
	dir := t.TempDir()
	cfg, err := filepath.Abs(filepath.Join("..", "..", "configs", "dqn-cartpole.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	r := herd(t, dir, "train", "--config", cfg, "--out", filepath.Join(dir, "run"),
		"--steps", "3000", "--quiet", "--set", "learning_rate=1e8", "--set", "learning_starts=100")
	if r.code != 1 || !strings.Contains(r.stderr, "diverged at step") || !strings.Contains(r.stderr, "losses/") {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	s, err := metrics.ReadSummary(filepath.Join(dir, "run", "summary.json"))
	if err != nil || s.Status != metrics.StatusDiverged || s.Steps >= 3000 {
		t.Fatalf("summary %+v, %v", s, err)
	}
	f, err := os.Open(filepath.Join(dir, "run", "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ck, err := nn.ReadSafetensors(f)
	if err != nil {
		t.Fatal(err)
	}
	for name, tensor := range ck.Tensors {
		for _, v := range tensor.Data {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				t.Fatalf("saved weight %s holds %v", name, v)
			}
		}
	}
	csv, _ := os.ReadFile(filepath.Join(dir, "run", "metrics.csv"))
	if !strings.Contains(string(csv), "Inf") && !strings.Contains(string(csv), "NaN") {
		t.Errorf("the non-finite loss is not in metrics.csv:\n%s", csv)
	}
}

func TestCLIEvalRefusesMismatch(t *testing.T) {
	dir := t.TempDir()
	for _, e := range []string{"CartPole-v1", "Acrobot-v1"} {
		if r := herd(t, dir, "train", "--algo", "ppo", "--env", e, "--steps", "256", "--quiet", "--set", "num_steps=64", "--out", e); r.code != 0 {
			t.Fatalf("exit %d\n%s", r.code, r.stderr)
		}
	}
	if r := herd(t, dir, "eval", "--run", "CartPole-v1", "--episodes", "1", "--env", "CartPole-v0"); r.code != 0 || !strings.Contains(r.stderr, "spaces match") {
		t.Errorf("compatible --env: exit %d\n%s", r.code, r.stderr)
	}
	if r := herd(t, dir, "eval", "--run", "CartPole-v1", "--episodes", "1", "--env", "Acrobot-v1"); r.code != 1 || !strings.Contains(r.stderr, "checkpoint mismatch") {
		t.Errorf("incompatible --env: exit %d\n%s", r.code, r.stderr)
	}
	// A checkpoint moved into another run's directory is refused.
	b, _ := os.ReadFile(filepath.Join(dir, "Acrobot-v1", "model.safetensors"))
	if err := os.WriteFile(filepath.Join(dir, "CartPole-v1", "model.safetensors"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if r := herd(t, dir, "eval", "--run", "CartPole-v1", "--episodes", "1"); r.code != 1 || !strings.Contains(r.stderr, "trained on Acrobot-v1, not CartPole-v1") {
		t.Errorf("swapped checkpoint: exit %d\n%s", r.code, r.stderr)
	}
}

func TestCLIRefusesBeforeWriting(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "twice.yaml")
	if err := os.WriteFile(cfg, []byte("algo: ppo\nenv: CartPole-v1\nsteps: 1000\nppo:\n  num_envs: 2\nppo:\n  num_envs: 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"train", "--config", cfg}, "written twice"},
		{[]string{"train", "--algo", "dqn", "--env", "CartPole-v1", "--steps", "1000", "--set", "buffer_size=1000000000000"}, "buffer_size=1000000000000"},
		{[]string{"train", "--algo", "ppo", "--env", "CartPole-v1", "--steps", "1000000000000", "--set", "num_envs=1000000"}, "num_envs"},
		{[]string{"train", "--algo", "ppo", "--env", "CartPole-v1", "--steps", "1000", "--set", "learning_rate=.inf"}, "learning_rate must be a finite number"},
	} {
		r := herd(t, dir, append(tc.args, "--out", "run")...)
		if r.code != 1 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d, want 1 and %q\n%s", tc.args, r.code, tc.want, r.stderr)
		}
		if _, err := os.Stat(filepath.Join(dir, "run")); !os.IsNotExist(err) {
			t.Fatalf("%v wrote %s", tc.args, filepath.Join(dir, "run"))
		}
	}
}
