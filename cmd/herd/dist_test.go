package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"herd/algo"
	"herd/algo/algotest"
	"herd/algo/dqn"
	"herd/algo/impala"
	"herd/algo/ppo"
	"herd/launch"
	"herd/transport"
)

// The test binary doubles as herd for the worker processes that launch
// starts: with HERD_TEST_AS_HERD=1 it runs `herd worker` over the fake
// algorithm instead of the tests (in init, before any TestMain).
func init() {
	if os.Getenv("HERD_TEST_AS_HERD") == "1" {
		root := &cobra.Command{Use: "herd", SilenceUsage: true, SilenceErrors: true}
		root.AddCommand(newWorkerCmdWith(testSpecs), newLaunchCmdWith(testSpecs, []string{os.Args[0]}))
		root.SetArgs(os.Args[1:])
		ctx, stop := interruptContext(os.Stderr)
		err := root.ExecuteContext(ctx)
		if err != nil {
			fmt.Fprintln(os.Stderr, "herd:", err)
		}
		stop()
		os.Exit(exitCode(err))
	}
}

func testSpecs() []algo.Spec {
	return []algo.Spec{algotest.Spec(), dqn.Spec(), ppo.Spec(), impala.Spec()}
}

func writeDistConfig(t *testing.T, iters int) string { return writeDistConfigP(t, iters, 1) }

func writeDistConfigP(t *testing.T, iters, policyWorkers int) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "fake-dist.yaml")
	cfg := fmt.Sprintf("algo: fake\nenv: CartPole-v1\nsteps: %d\nlog_every: 128\nruntime: {executor: dist, env_workers: 2, policy_workers: %d}\nfake: {num_envs: 4, num_steps: 32}\n", iters*4*32, policyWorkers)
	if err := os.WriteFile(p, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func launchCmd(t *testing.T, ctx context.Context, args ...string) (string, string, error) {
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
	out, prof := filepath.Join(t.TempDir(), "run"), filepath.Join(t.TempDir(), "prof")
	stdout, stderr, err := launchCmd(t, ctx, "--config", writeDistConfig(t, 10), "--out", out, "--quiet", "--cpuprofile", prof)
	if err != nil {
		t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
	for _, f := range []string{"config.yaml", "metrics.csv", "summary.json", "model.safetensors"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}
	// --cpuprofile: a profile per process, and each worker's timing.
	for _, f := range []string{"launch.pprof", "learner.pprof", "policy-worker-0.pprof", "env-worker-0.pprof", "env-worker-1.pprof"} {
		if st, err := os.Stat(filepath.Join(prof, f)); err != nil || st.Size() == 0 {
			t.Errorf("profile %s: %v", f, err)
		}
	}
	var timing struct {
		Env struct {
			Steps int64 `json:"steps"`
		} `json:"env_worker"`
	}
	if b, err := os.ReadFile(filepath.Join(prof, "env-worker-0.pprof.steps.json")); err != nil {
		t.Error(err)
	} else if err := json.Unmarshal(b, &timing); err != nil || timing.Env.Steps == 0 {
		t.Errorf("env worker timing %s: %v, %d steps", b, err, timing.Env.Steps)
	}
	if s := readSummary(t, out); s["steps"].(float64) != 10*4*32 {
		t.Errorf("summary steps %v", s["steps"])
	}
	for _, want := range []string{"2 env workers × 4 envs, 1 policy worker, 1 learner", "wrote " + out + "/{"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout does not say %q:\n%s", want, stdout)
		}
	}
}

// herd launch adds the wire bytes per env step to summary.json: every
// connection attributed to a kind (the kinds sum to the total), each kind
// the on-policy topology uses non-zero, and inference and samples growing
// with the run's length.
func TestLaunchWireBytes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	onPolicy := map[int]float64{}
	for _, iters := range []int{10, 30} {
		out := filepath.Join(t.TempDir(), "run")
		stdout, stderr, err := launchCmd(t, ctx, "--config", writeDistConfig(t, iters), "--out", out, "--quiet")
		if err != nil {
			t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
		}
		if !strings.Contains(stdout, "wire: ") {
			t.Errorf("stdout does not report the wire bytes:\n%s\nstderr:\n%s", stdout, stderr)
		}
		s := readSummary(t, out)
		steps := s["steps"].(float64)
		total, ok := s["wire_bytes"].(float64)
		if !ok || total <= 0 {
			t.Fatalf("summary wire_bytes %v", s["wire_bytes"])
		}
		if got, want := s["wire_bytes_per_env_step"].(float64), total/steps; math.Abs(got-want) > 0.05 {
			t.Errorf("wire_bytes_per_env_step %v, want %v / %v", got, total, steps)
		}
		kinds, _ := s["wire_by_kind"].(map[string]any)
		var sum float64
		for _, k := range transport.Kinds() {
			kb, _ := kinds[launch.WireLabel(k)].(map[string]any)
			b, _ := kb["bytes"].(float64)
			if b <= 0 {
				t.Errorf("%d iterations: %s carried %v bytes, want > 0", iters, k, kb["bytes"])
			}
			sum += b
		}
		if _, ok := kinds["other"]; ok || sum != total {
			t.Errorf("%d iterations: kinds sum to %v of %v bytes (other: %v)", iters, sum, total, kinds["other"])
		}
		inf := kinds[transport.KindInference].(map[string]any)["bytes"].(float64)
		smp := kinds[transport.KindSamples].(map[string]any)["bytes"].(float64)
		// The floats alone, twice (into the server and out): a request's 4
		// obs and its reply's 2 outputs per env step; a segment's 4 obs.
		if inf/steps < 2*(4+2)*4 || smp/steps < 2*4*4 {
			t.Errorf("%d iterations: inference %.1f B, samples %.1f B per env step, below the floats they carry (48, 32)", iters, inf/steps, smp/steps)
		}
		onPolicy[iters] = inf + smp
		t.Logf("%d iterations: %s", iters, strings.TrimSpace(stdout[strings.Index(stdout, "wire: "):]))
	}
	// Inference and samples grow with the steps: 3x the steps, 3x the
	// bytes, less the steps the env workers ran ahead of the learner when it
	// stopped (up to its queue and one segment in flight per env worker, a
	// similar number in both runs, which the shorter run feels more).
	if r := onPolicy[30] / onPolicy[10]; r < 1.5 || r > 3.5 {
		t.Errorf("inference + samples: %.0f B at 10 iterations, %.0f B at 30 (ratio %.2f, want 1.5–3.5)", onPolicy[10], onPolicy[30], r)
	}
}

// herd launch runs the off-policy (Ape-X) config too: env worker
// processes with inline policy copies, no policy workers, the learner with
// the replay.
func TestLaunchOffPolicy(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	out := filepath.Join(t.TempDir(), "run")
	stdout, stderr, err := launchCmd(t, ctx, "--config", filepath.Join("..", "..", "configs", "dqn-cartpole-dist.yaml"),
		"--steps", "12000", "--out", out, "--quiet")
	if err != nil {
		t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
	if !strings.Contains(stdout, "0 policy workers") {
		t.Errorf("stdout does not report 0 policy workers:\n%s", stdout)
	}
	if s := readSummary(t, out); s["steps"].(float64) != 12000 {
		t.Errorf("summary steps %v", s["steps"])
	}
}

// herd launch runs several policies (a multiagent section) under dist:
// each env and policy worker process plays its role for every policy, and
// the learner process trains them all, each from its own agents' rows:
// three PPO policies (configs/ippo-simple-spread-3pol.yaml), and the twin
// trainer (configs/twin-simple-tag.yaml: PPO for the adversaries, DQN for
// the runner, whose env worker parts act with inline copies and push
// transitions to its learner's replay), scaled down.
func TestLaunchSeveralPolicies(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	twin, err := os.ReadFile(filepath.Join("..", "..", "configs", "twin-simple-tag.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// 16 rows (4 envs × 4 agents), segments of 20 steps, episodes of 10,
	// and the runner's chunks of 10 steps: every sample, from either env
	// worker, ends whole episodes, so their count is fixed.
	small := strings.NewReplacer("agent_id=true\n", "agent_id=true&max_cycles=10\n", "num_envs: 64", "num_envs: 16",
		"num_steps: 100", "num_steps: 20", "update_epochs: 10", "update_epochs: 2", "learning_starts: 5000", "learning_starts: 200",
		"buffer_size: 50000", "buffer_size: 2000").Replace(string(twin))
	twinFile := filepath.Join(t.TempDir(), "twin.yaml")
	if err := os.WriteFile(twinFile, []byte(small), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, config, workers string
		steps                 float64
		episodes              map[string]float64
		present               []string
	}{{
		name: "ippo", config: filepath.Join("..", "..", "configs", "ippo-simple-spread-3pol.yaml"), steps: 9600,
		workers: "2 env workers × 48 agent rows (3 policies), 1 policy worker, 1 learner",
		// 9600 steps over 48 rows: 200 per row, 8 episodes of 25 per row, 16 rows per policy.
		episodes: map[string]float64{"a0": 128, "a1": 128, "a2": 128},
	}, {
		name: "twin", config: twinFile, steps: 1280,
		workers: "2 env workers × 16 agent rows (2 policies), 1 policy worker, 1 learner",
		// 1280 steps over 16 rows: 80 per row, 8 episodes of 10 per row;
		// 12 adversary rows, 4 runner rows.
		episodes: map[string]float64{"adversary": 96, "good": 32},
		present:  []string{"policy/adversary/losses/value_loss", "policy/good/losses/td_loss"},
	}} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
			defer cancel()
			out := filepath.Join(t.TempDir(), "run")
			stdout, stderr, err := launchCmd(t, ctx, "--config", c.config,
				"--set", "runtime.executor=dist", "--set", "runtime.env_workers=2", "--steps", strconv.Itoa(int(c.steps)), "--out", out, "--quiet")
			if err != nil {
				t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
			}
			if !strings.Contains(stdout, c.workers) {
				t.Errorf("stdout does not report the workers:\n%s", stdout)
			}
			s := readSummary(t, out)
			if s["steps"].(float64) != c.steps {
				t.Errorf("summary steps %v, want %v", s["steps"], c.steps)
			}
			pol, _ := s["policies"].(map[string]any)
			for id, want := range c.episodes {
				if n, _ := pol["policy/"+id+"/episodes"].(float64); n != want {
					t.Errorf("policy %s: %v episodes, want %v (its rows' only, every one)", id, n, want)
				}
				for _, col := range []string{"dropped", "duplicates", "decode_errors"} {
					if d, ok := pol["policy/"+id+"/dist/"+col].(float64); !ok || d != 0 {
						t.Errorf("policy %s: dist/%s %v (present %v), want 0", id, col, d, ok)
					}
				}
			}
			for _, col := range c.present {
				if _, ok := pol[col]; !ok {
					t.Errorf("summary.json has no %s", col)
				}
			}
		})
	}
}

// herd launch runs the on-policy topology under inline inference: env
// worker processes with their own policy copies, no policy worker, and no
// inference bytes on the wire.
func TestLaunchInline(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	out := filepath.Join(t.TempDir(), "run")
	cfg := filepath.Join(t.TempDir(), "fake-inline.yaml")
	if err := os.WriteFile(cfg, []byte("algo: fake\nenv: CartPole-v1\nsteps: 1280\nruntime: {executor: dist, env_workers: 2, inference: inline}\nfake: {num_envs: 4, num_steps: 32}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, err := launchCmd(t, ctx, "--config", cfg, "--out", out, "--quiet")
	if err != nil {
		t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
	if !strings.Contains(stdout, "2 env workers × 4 envs, 0 policy workers, 1 learner") {
		t.Errorf("stdout does not report 0 policy workers:\n%s", stdout)
	}
	s := readSummary(t, out)
	if s["steps"].(float64) != 10*4*32 {
		t.Errorf("summary steps %v", s["steps"])
	}
	kinds, _ := s["wire_by_kind"].(map[string]any)
	kb, _ := kinds[launch.WireLabel(transport.KindInference)].(map[string]any)
	if b, _ := kb["bytes"].(float64); b != 0 {
		t.Errorf("inline inference: %v inference bytes on the wire, want 0", b)
	}
}

// kill -9 of an env worker mid-run: the launcher restarts it and the run
// completes.
func TestLaunchRestartsKilledWorker(t *testing.T) {
	killMidRun(t, writeDistConfig(t, 400), "kill", "env worker 0 exited", "env-0")
}

// killMidRun launches a run of 400 iterations of cfg, kill -9s the worker
// names[0] once every one of names has registered, and checks that the run
// completes every step and that launch reported the restart (restarted).
// It returns the run directory.
func killMidRun(t *testing.T, cfg, run, restarted string, names ...string) string {
	t.Helper()
	srv, ctx := natsRun(t, 120*time.Second)
	out := filepath.Join(t.TempDir(), "run")
	done := launchAsync(t, ctx, "--config", cfg, "--out", out, "--quiet", "--nats", srv.URL(), "--run", run, "--ttl", "1s")
	mem := watchRun(t, ctx, srv.URL(), run)
	pid := awaitPIDs(t, ctx, mem, done, names...)[names[0]]
	time.Sleep(300 * time.Millisecond) // mid-run
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("%v\nstderr:\n%s", r.err, r.stderr)
	}
	if !strings.Contains(r.stderr, restarted) {
		t.Errorf("the kill did not hit the run (no %q); stderr:\n%s", restarted, r.stderr)
	}
	if s := readSummary(t, out); s["steps"].(float64) != 400*4*32 {
		t.Errorf("summary steps %v", s["steps"])
	}
	return out
}

// When the controller's registration disappears without a goodbye (its
// process was killed), every worker exits by itself within 2 × TTL.
func TestWorkersExitWhenControllerGone(t *testing.T) {
	srv, ctx := natsRun(t, 60*time.Second)
	n, err := dialNATS(t, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	const run, ttl = "orphans", time.Second
	putRunConfig(t, ctx, n, run, writeDistConfig(t, 1000))
	mem, err := n.Membership(ctx, run, transport.Options{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	cctx, crash := context.WithCancel(ctx)
	if _, err := mem.Register(cctx, launch.ControllerName, nil); err != nil {
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

// herd launch refuses a run directory that holds a run unless --force
// (which replaces it) is given; --resume fails with the reason, as in herd
// train; both refusals come before any worker process starts.
func TestLaunchForceResume(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cfg := writeDistConfig(t, 4)
	out := filepath.Join(t.TempDir(), "run")

	// --resume of nothing, and --force with --resume: refused.
	if _, _, err := launchCmd(t, ctx, "--config", cfg, "--out", out, "--quiet", "--resume"); !errors.Is(err, algo.ErrCannotResume) {
		t.Errorf("--resume of an empty dir: %v, want ErrCannotResume", err)
	}
	if _, _, err := launchCmd(t, ctx, "--config", cfg, "--out", out, "--quiet", "--force", "--resume"); err == nil || !strings.Contains(err.Error(), "exclude") {
		t.Errorf("--force --resume: %v", err)
	}

	if so, se, err := launchCmd(t, ctx, "--config", cfg, "--out", out, "--quiet"); err != nil {
		t.Fatalf("first run: %v\nstdout:\n%s\nstderr:\n%s", err, so, se)
	}
	first, err := os.ReadFile(filepath.Join(out, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}

	// Again without --force: refused at once, before launching anything.
	start := time.Now()
	so, _, err := launchCmd(t, ctx, "--config", cfg, "--out", out, "--quiet")
	if !errors.Is(err, algo.ErrRunExists) {
		t.Errorf("second run without --force: %v, want ErrRunExists", err)
	}
	if strings.Contains(so, "launching") {
		t.Errorf("a refused run launched workers:\n%s", so)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("refusal took %v", d)
	}
	if _, _, err := launchCmd(t, ctx, "--config", cfg, "--out", out, "--quiet", "--resume"); !errors.Is(err, algo.ErrCannotResume) {
		t.Errorf("--resume of a run: %v, want ErrCannotResume", err)
	}
	if b, _ := os.ReadFile(filepath.Join(out, "summary.json")); !bytes.Equal(b, first) {
		t.Error("a refused run changed summary.json")
	}

	// --force with another seed replaces it.
	if so, se, err := launchCmd(t, ctx, "--config", cfg, "--out", out, "--quiet", "--seed", "7", "--force"); err != nil {
		t.Fatalf("--force: %v\nstdout:\n%s\nstderr:\n%s", err, so, se)
	}
	if s := readSummary(t, out); s["seed"] != float64(7) {
		t.Errorf("summary seed after --force: %v", s["seed"])
	}
	if b, _ := os.ReadFile(filepath.Join(out, "summary.json")); bytes.Equal(b, first) {
		t.Error("--force left the old summary.json")
	}
}

// With 2 policy workers, kill -9 of one mid-run stalls the env steps for
// at most 2 s: the env workers' requests that the dead one held time out
// (worker.Timeouts.Infer) and the queue group routes the retries to the
// live one. The stall is the largest wall-clock gap between metrics.csv
// rows (one every 128 env steps).
func TestLaunchKilledPolicyWorkerNoStall(t *testing.T) {
	out := killMidRun(t, writeDistConfigP(t, 400, 2), "killpolicy", "policy worker 0 exited", "policy-0", "policy-1")
	b, err := os.ReadFile(filepath.Join(out, "metrics.csv"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) < 10 {
		t.Fatalf("metrics.csv has %d lines", len(lines))
	}
	prev, maxGap, at := 0.0, 0.0, 0.0
	for _, l := range lines[1:] {
		f := strings.Split(l, ",")
		w, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			t.Fatalf("wall_seconds %q: %v", f[1], err)
		}
		if w-prev > maxGap {
			maxGap, at = w-prev, w
		}
		prev = w
	}
	t.Logf("max gap between metrics rows (128 env steps): %.3f s, ending at %.3f s of %.3f s", maxGap, at, prev)
	if maxGap > 2 {
		t.Errorf("env steps stalled %.3f s after a policy worker was killed, want ≤ 2 s", maxGap)
	}
}

// natsNode is one nats-server process of natsCluster.
type natsNode struct {
	name, url string
	monitor   string // http://host:port of the monitoring endpoint
	cmd       *exec.Cmd
}

// herdClients returns how many herd processes (connection names "herd …")
// the node has as clients.
func (n natsNode) herdClients() (int, error) {
	resp, err := http.Get(n.monitor + "/connz?limit=1024")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var c struct {
		Conns []struct {
			Name string `json:"name"`
		} `json:"connections"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
		return 0, err
	}
	k := 0
	for _, cn := range c.Conns {
		if strings.HasPrefix(cn.Name, "herd ") {
			k++
		}
	}
	return k, nil
}

// natsCluster builds nats-server from the pinned module and starts n
// nodes as one JetStream cluster on loopback, each with its own store and
// its log in the test's temp dir (printed when the test fails). It returns
// once JetStream answers with a meta leader elected. Free ports are picked
// by binding and closing, so another process can take one before a node
// binds it; a node that exits during start-up makes the whole cluster start
// again on fresh ports (at most three tries).
func natsCluster(t *testing.T, n int) []natsNode {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go tool is not available to build nats-server")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "nats-server")
	if b, err := exec.Command(goTool, "build", "-o", bin, "github.com/nats-io/nats-server/v2").CombinedOutput(); err != nil {
		t.Fatalf("build nats-server: %v\n%s", err, b)
	}
	for try := 1; ; try++ {
		nodes, err := startNATSCluster(t, bin, filepath.Join(dir, fmt.Sprintf("try%d", try)), n)
		if err == nil {
			return nodes
		}
		if try == 3 {
			t.Fatalf("nats cluster not ready after %d tries: %v", try, err)
		}
		t.Logf("nats cluster try %d: %v; starting again on fresh ports", try, err)
	}
}

// startNATSCluster is one try of natsCluster. On error every node it
// started is stopped (its log is still printed if the test fails).
func startNATSCluster(t *testing.T, bin, dir string, n int) ([]natsNode, error) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ports := make([]int, 3*n) // client, route, monitoring
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = l.Addr().(*net.TCPAddr).Port
		l.Close()
	}
	var nodes []natsNode
	exited := make(chan string, n)
	var stops []func()
	stopAll := func() {
		for _, stop := range stops {
			stop()
		}
	}
	for i := range n {
		var routes []string
		for j := range n {
			if j != i {
				routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", ports[n+j]))
			}
		}
		name := fmt.Sprintf("n%d", i)
		conf := fmt.Sprintf("server_name: %s\nlisten: 127.0.0.1:%d\nhttp: 127.0.0.1:%d\njetstream { store_dir: %q }\ncluster { name: herd, listen: 127.0.0.1:%d, routes: [%s] }\n",
			name, ports[i], ports[2*n+i], filepath.Join(dir, "js"+name), ports[n+i], strings.Join(routes, ", "))
		cf := filepath.Join(dir, name+".conf")
		if err := os.WriteFile(cf, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		logf, err := os.Create(filepath.Join(dir, name+".log"))
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "-c", cf)
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waited := make(chan struct{})
		go func() {
			_ = cmd.Wait()
			close(waited)
			exited <- name
		}()
		var once sync.Once
		stop := func() {
			once.Do(func() {
				_ = cmd.Process.Kill()
				<-waited
				_ = logf.Close()
			})
		}
		stops = append(stops, stop)
		t.Cleanup(func() {
			stop()
			if t.Failed() {
				b, _ := os.ReadFile(logf.Name())
				t.Logf("nats-server %s (%s) log:\n%s", name, dir, b)
			}
		})
		nodes = append(nodes, natsNode{name: name, url: fmt.Sprintf("nats://127.0.0.1:%d", ports[i]),
			monitor: fmt.Sprintf("http://127.0.0.1:%d", ports[2*n+i]), cmd: cmd})
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		select {
		case name := <-exited:
			stopAll()
			return nil, fmt.Errorf("nats-server %s exited during start-up (see its log)", name)
		default:
		}
		nc, err := nats.Connect(nodes[0].url)
		if err == nil {
			js, _ := jetstream.New(nc)
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_, err = js.AccountInfo(ctx)
			cancel()
			nc.Close()
		}
		if err == nil {
			return nodes, nil
		}
		if time.Now().After(deadline) {
			stopAll()
			return nil, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// trainingStarted tells whether run "cluster" has every worker registered
// and a version of the weights published; each look is bounded, so that
// the caller also sees the launch end.
func trainingStarted(ctx context.Context, js jetstream.JetStream) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, "herd_cluster_members")
	if err != nil {
		return false
	}
	keys, err := kv.Keys(ctx)
	if err != nil || len(keys) < 5 { // controller, 2 env, 1 policy, learner
		return false
	}
	obs, err := js.ObjectStore(ctx, "herd_cluster_params")
	if err != nil {
		return false
	}
	objs, err := obs.List(ctx)
	return err == nil && len(objs) > 0
}

// Workers spread over a 3-node NATS cluster (nats.go picks a random server
// of the --nats list), the run's buckets on 3 replicas; kill -9 mid-run of
// a node that has herd clients and, where one such does, leads the run's
// streams: its clients reconnect to another node, the streams it led elect
// new leaders, and the run completes.
func TestLaunchNATSClusterNodeKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	t0 := time.Now()
	nodes := natsCluster(t, 3)
	var urls []string
	for _, nd := range nodes {
		urls = append(urls, nd.url)
	}
	t.Logf("cluster up in %.1f s", time.Since(t0).Seconds())
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	out := filepath.Join(t.TempDir(), "run")
	// The TTL outlasts a stream leader's election (4–9 s in nats-server):
	// a registration is not dropped while the members bucket has no leader.
	done := launchAsync(t, ctx, "--config", writeDistConfig(t, 150), "--out", out, "--quiet",
		"--nats", strings.Join(urls, ","), "--nats-replicas", "3", "--run", "cluster", "--ttl", "15s")
	nc, err := nats.Connect(strings.Join(urls, ","), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	streams := []string{"KV_herd_cluster_config", "KV_herd_cluster_members", "OBJ_herd_cluster_params"}
	// Wait until training runs: every worker registered and a version of
	// the weights published.
	for ready := false; !ready; {
		select {
		case r := <-done:
			t.Fatalf("launch ended before the kill at %.1f s: %v\nstdout:\n%s\nstderr:\n%s", time.Since(t0).Seconds(), r.err, r.stdout, r.stderr)
		case <-time.After(50 * time.Millisecond):
		}
		ready = trainingStarted(ctx, js)
	}
	t.Logf("training in %.1f s", time.Since(t0).Seconds())
	leads := map[string]int{}
	for _, name := range streams {
		st, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		info := st.CachedInfo()
		if info.Config.Replicas != 3 || info.Cluster == nil || len(info.Cluster.Replicas) != 2 {
			t.Fatalf("stream %s: replicas %d, cluster %+v; want 3 replicas", name, info.Config.Replicas, info.Cluster)
		}
		leads[info.Cluster.Leader]++
		t.Logf("stream %s: leader %s", name, info.Cluster.Leader)
	}
	victim, best := -1, -1
	for i, nd := range nodes {
		k, err := nd.herdClients()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("node %s: %d herd clients, leads %d of the run's streams", nd.name, k, leads[nd.name])
		if score := 10*leads[nd.name] + k; k > 0 && score > best {
			victim, best = i, score
		}
	}
	if victim < 0 {
		t.Fatal("no node has herd clients")
	}
	t.Logf("kill -9 %s at %.1f s", nodes[victim].name, time.Since(t0).Seconds())
	if err := nodes[victim].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	var r launchResult
	select {
	case r = <-done:
	case <-ctx.Done():
		t.Fatal("launch did not end")
	}
	t.Logf("run ended at %.1f s", time.Since(t0).Seconds())
	if r.err != nil {
		t.Fatalf("%v\nstderr:\n%s", r.err, r.stderr)
	}
	if s := readSummary(t, out); s["steps"].(float64) != 150*4*32 {
		t.Errorf("summary steps %v", s["steps"])
	}
	b, err := os.ReadFile(filepath.Join(out, "metrics.csv"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) < 150*4*32/128 {
		t.Errorf("metrics.csv has %d lines, want one per 128 steps", len(lines))
	}
	prev, maxGap, at := 0.0, 0.0, 0.0
	for _, l := range lines[1:] {
		w, err := strconv.ParseFloat(strings.Split(l, ",")[1], 64)
		if err != nil {
			t.Fatalf("metrics.csv wall_seconds of %q: %v", l, err)
		}
		if w-prev > maxGap {
			maxGap, at = w-prev, w
		}
		prev = w
	}
	t.Logf("training %.1f s, longest stall %.1f s (ending at %.1f s)", prev, maxGap, at)
	if maxGap > 15 { // longer than an election plus a publish retry: show what the workers said
		t.Logf("launch stderr:\n%s", r.stderr)
	}
}

// launch --no-workers starts no process: it stores the config, waits for a
// learner registered elsewhere, and ends when that learner is gone.
func TestLaunchNoWorkers(t *testing.T) {
	srv := startNATS(t, transport.ServerOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, _, err := launchCmd(t, ctx, "--config", writeDistConfig(t, 1), "--no-workers"); err == nil {
		t.Fatal("--no-workers without --nats was accepted")
	}
	done := make(chan error, 1)
	go func() {
		_, _, err := launchCmd(t, ctx, "--config", writeDistConfig(t, 1), "--nats", srv.URL(), "--run", "ctl", "--no-workers", "--ttl", "1s")
		done <- err
	}()
	n, err := dialNATS(t, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.RunConfig(ctx, "ctl"); err != nil {
		t.Fatalf("the controller stored no config: %v", err)
	}
	mem, err := n.Membership(ctx, "ctl", transport.Options{TTL: time.Second})
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
	// A learner that finishes marks the run ended with its exit status,
	// then deregisters.
	if err := n.EndRun(ctx, "ctl", "0 completed"); err != nil {
		t.Fatal(err)
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

// herd launch --metrics-addr serves the learner's live metrics: a scrape
// during the run sees the env steps move.
func TestLaunchMetricsAddrLiveScrape(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	t.Setenv("HERD_TEST_AS_HERD", "1")
	cmd := newLaunchCmdWith(testSpecs, []string{os.Args[0]})
	pr, pw := io.Pipe()
	cmd.SetOut(pw)
	cmd.SetErr(io.Discard)
	cmd.SetArgs([]string{"--config", writeDistConfig(t, 100000), "--out", filepath.Join(t.TempDir(), "run"),
		"--quiet", "--metrics-addr", "127.0.0.1:0"})
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx); pw.Close() }()
	lines := bufio.NewScanner(pr)
	var url string
	for url == "" && lines.Scan() {
		if _, u, ok := strings.Cut(lines.Text(), "metrics for Prometheus at "); ok {
			url = u
		}
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	if url == "" {
		t.Fatalf("no metrics address printed: %v", <-done)
	}
	var seen []float64
	for len(seen) < 2 && ctx.Err() == nil {
		if s := scrapeSteps(t, url); s > 0 && (len(seen) == 0 || s > seen[0]) {
			seen = append(seen, s)
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	<-done
	if len(seen) < 2 {
		t.Fatalf("herd_env_steps_total did not move: %v", seen)
	}
}

// scrapeSteps reads herd_env_steps_total from a Prometheus endpoint (0 if
// it is not there yet or the endpoint is gone).
func scrapeSteps(t *testing.T, url string) float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "herd_env_steps_total "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}
