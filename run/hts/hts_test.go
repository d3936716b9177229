package hts

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"herd/algo"
	"herd/algo/a2c"
	"herd/algo/dqn"
	"herd/algo/ppo"
	"herd/env"
	"herd/nn"
	"herd/sample"
)

// resolve reads a small PPO or A2C run under HTS.
func resolve(t *testing.T, spec algo.Spec, file string) *algo.Resolved {
	t.Helper()
	res, err := algo.Resolve([]byte(file), []algo.Spec{spec}, algo.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

const ppoFile = `algo: ppo
env: CartPole-v1
seed: 3
steps: 640
runtime: {executor: hts}
ppo: {num_envs: 4, num_steps: 32, num_minibatches: 2, update_epochs: 2}
`

// train runs HTS and returns the sha256 of the final parameters.
func train(t *testing.T, res *algo.Resolved, opt Options) string {
	t.Helper()
	m, err := Train(context.Background(), &algo.Runtime{Header: res.Header, Log: algo.Discard()}, res.Spec, res.Config, opt)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "model.safetensors")
	if err := m.Save(path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestSameBitsForAnyWorkers is the HTS promise: the final parameters do not
// depend on the numbers of env and policy workers, on GOMAXPROCS or on env
// step times.
func TestSameBitsForAnyWorkers(t *testing.T) {
	for _, spec := range []algo.Spec{ppo.Spec(), a2c.Spec()} {
		t.Run(spec.Name, func(t *testing.T) {
			file := ppoFile
			if spec.Name == "a2c" {
				file = "algo: a2c\nenv: CartPole-v1\nseed: 3\nsteps: 640\nruntime: {executor: hts}\na2c: {num_envs: 4, num_steps: 8}\n"
			}
			res := resolve(t, spec, file)
			want := train(t, res, Options{EnvWorkers: 1, PolicyWorkers: 1})
			slow := &env.StepTime{Mean: 30 * time.Microsecond, CV: 2, TailProb: 0.05, TailFactor: 10}
			for _, c := range []struct {
				e, p, procs int
				st          *env.StepTime
			}{{4, 1, 2, nil}, {2, 2, 2, nil}, {4, 4, 1, nil}, {2, 8, 2, nil}, {4, 2, 2, slow}, {1, 4, 1, slow}} {
				prev := runtime.GOMAXPROCS(c.procs)
				got := train(t, res, Options{EnvWorkers: c.e, PolicyWorkers: c.p, StepTime: c.st})
				runtime.GOMAXPROCS(prev)
				if got != want {
					t.Errorf("E=%d P=%d GOMAXPROCS=%d step time %v: parameters %s, with E=1 P=1 %s", c.e, c.p, c.procs, c.st != nil, got, want)
				}
			}
		})
	}
}

// versions wraps a spec so that its learner records the weight version
// that gathered each segment it learns from.
func versions(spec algo.Spec, seen *[]uint64) algo.Spec {
	inner := spec.Pieces
	spec.Pieces = func(h algo.Header, cfg algo.Config, sp algo.Spaces) (*algo.Pieces, error) {
		p, err := inner(h, cfg, sp)
		if err != nil {
			return nil, err
		}
		newLearner := p.NewSegmentLearner
		p.NewSegmentLearner = func() (algo.SegmentLearner, error) {
			l, err := newLearner()
			return &recorder{SegmentLearner: l, seen: seen}, err
		}
		return p, nil
	}
	return spec
}

type recorder struct {
	algo.SegmentLearner
	mu   sync.Mutex
	seen *[]uint64
}

func (r *recorder) Learn(ctx context.Context, seg *sample.Segment) ([]algo.Stat, error) {
	r.mu.Lock()
	*r.seen = append(*r.seen, seg.Version)
	r.mu.Unlock()
	return r.SegmentLearner.Learn(ctx, seg)
}

func (r *recorder) Model() algo.Model { return r.SegmentLearner.(algo.Modeler).Model() }

// TestOneUpdateLag checks the barrier protocol: segment k is gathered with
// weights k−1 (segments 0 and 1 with the initial ones), while the
// synchronous baseline gathers segment k with weights k.
func TestOneUpdateLag(t *testing.T) {
	res := resolve(t, ppo.Spec(), ppoFile) // 640 steps = 5 segments of 4 × 32
	for _, sync := range []bool{false, true} {
		var seen []uint64
		spec := versions(res.Spec, &seen)
		if _, err := Train(context.Background(), &algo.Runtime{Header: res.Header, Log: algo.Discard()}, spec, res.Config,
			Options{EnvWorkers: 2, PolicyWorkers: 2, Sync: sync}); err != nil {
			t.Fatal(err)
		}
		want := []uint64{0, 0, 1, 2, 3}
		if sync {
			want = []uint64{0, 1, 2, 3, 4}
		}
		if !slices.Equal(seen, want) {
			t.Errorf("sync=%v: segments gathered with versions %v, want %v", sync, seen, want)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	res := resolve(t, ppo.Spec(), ppoFile)
	rt := &algo.Runtime{Header: res.Header, Log: algo.Discard()}
	for _, opt := range []Options{{EnvWorkers: 5}, {Alpha: 16}, {PolicyWorkers: -1}} {
		if _, err := Train(context.Background(), rt, res.Spec, res.Config, opt); !errors.Is(err, algo.ErrConfig) {
			t.Errorf("%+v: %v, want ErrConfig", opt, err)
		}
	}
	d, err := algo.Resolve([]byte("algo: dqn\nenv: CartPole-v1\nsteps: 1000\n"), []algo.Spec{dqn.Spec()}, algo.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Train(context.Background(), &algo.Runtime{Header: d.Header, Log: algo.Discard()}, d.Spec, d.Config, Options{}); !errors.Is(err, algo.ErrConfig) {
		t.Errorf("DQN under HTS: %v, want ErrConfig", err)
	}
}

// TestCancelStopsEverything cancels a run whose envs are slow and checks it
// returns the model promptly with the context's error and leaves no
// goroutine behind.
func TestCancelStopsEverything(t *testing.T) {
	res := resolve(t, ppo.Spec(), ppoFile)
	res.Header.Steps = 1 << 20
	before := runtime.NumGoroutine()
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	m, err := Train(ctx, &algo.Runtime{Header: res.Header, Log: algo.Discard()}, res.Spec, res.Config,
		Options{EnvWorkers: 4, PolicyWorkers: 2, StepTime: &env.StepTime{Mean: 200 * time.Microsecond, CV: 1}})
	if !errors.Is(err, context.DeadlineExceeded) || m == nil {
		t.Fatalf("cancelled run: model %v, error %v", m, err)
	}
	if d := time.Since(t0); d > 5*time.Second {
		t.Fatalf("took %v to stop", d)
	}
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Fatalf("%d goroutines after the run, %d before", n, before)
	}
}

// TestTrainRunDispatches runs a config with runtime.executor hts through
// algo.TrainRun and the executors list, as `herd train` does.
func TestTrainRunDispatches(t *testing.T) {
	res := resolve(t, ppo.Spec(), ppoFile)
	res.Header.Out = t.TempDir()
	exec := []algo.Executor{Executor()}
	sum, err := algo.TrainRun(context.Background(), res, algo.RunOptions{Executors: exec, Dir: algo.DirForce})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Steps != 640 {
		t.Fatalf("summary steps %d, want 640", sum.Steps)
	}
	if _, err := algo.TrainRun(context.Background(), res, algo.RunOptions{Dir: algo.DirForce}); !errors.Is(err, algo.ErrConfig) {
		t.Fatalf("hts without an executor: %v, want ErrConfig", err)
	}
}

func BenchmarkHTSCollect(b *testing.B) {
	res, err := algo.Resolve([]byte(ppoFile), []algo.Spec{ppo.Spec()}, algo.Overrides{})
	if err != nil {
		b.Fatal(err)
	}
	res.Header.Steps = 4 * 32 * 8
	for b.Loop() {
		if _, err := Train(context.Background(), &algo.Runtime{Header: res.Header, Log: algo.Discard()}, res.Spec, res.Config,
			Options{EnvWorkers: 4, PolicyWorkers: 2}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(res.Header.Steps)*float64(b.N)/b.Elapsed().Seconds(), "steps/s")
}

// TestTrainRunNoRace runs HTS through algo.TrainRun with a metrics row every
// 64 env steps, shorter than a segment, for PPO and A2C: the divergence
// guard then inspects the parameters at every segment, and must do so only
// while the learner is not writing them (meant for go test -race).
func TestTrainRunNoRace(t *testing.T) {
	exec := []algo.Executor{Executor()}
	for _, c := range []struct {
		spec algo.Spec
		file string
	}{
		{ppo.Spec(), strings.Replace(ppoFile, "steps: 640", "steps: 640\nlog_every: 64", 1)},
		{a2c.Spec(), "algo: a2c\nenv: CartPole-v1\nseed: 3\nsteps: 640\nlog_every: 16\nruntime: {executor: hts}\na2c: {num_envs: 4, num_steps: 8}\n"},
	} {
		res := resolve(t, c.spec, c.file)
		res.Header.Out = t.TempDir()
		sum, err := algo.TrainRun(context.Background(), res, algo.RunOptions{Executors: exec, Dir: algo.DirForce})
		if err != nil || sum.Steps != 640 {
			t.Errorf("%s: steps %d, error %v; want 640, nil", c.spec.Name, sum.Steps, err)
		}
	}
}

// TestMultiAgentSameBits: PPO on simple_spread's agent rows (MAPPO's
// joint-observation rows, 4 envs × 3 agents) under HTS gives the same
// parameters for env workers 1, 2 and 4 and policy workers 1 and 4, and
// learns from the parallel view: every segment row is one agent's step.
func TestMultiAgentSameBits(t *testing.T) {
	file := `algo: ppo
env: mpe/simple_spread_v3?agent_id=true&state=true&max_cycles=10
seed: 5
steps: 960
runtime: {executor: hts}
ppo: {num_envs: 12, num_steps: 20, num_minibatches: 2, update_epochs: 2, actor_obs: 21, hidden: [16]}
`
	res := resolve(t, ppo.Spec(), file)
	want := train(t, res, Options{EnvWorkers: 1, PolicyWorkers: 1})
	for _, c := range []struct{ e, p, procs int }{{2, 1, 2}, {1, 4, 2}, {2, 4, 1}, {4, 4, 2}} {
		prev := runtime.GOMAXPROCS(c.procs)
		got := train(t, res, Options{EnvWorkers: c.e, PolicyWorkers: c.p})
		runtime.GOMAXPROCS(prev)
		if got != want {
			t.Errorf("E=%d P=%d GOMAXPROCS=%d: parameters %s, with E=1 P=1 %s", c.e, c.p, c.procs, got, want)
		}
	}
	// Episodes are the agents' own: 10 steps each, 3 per env and episode.
	var lens []int
	rec := &episodeLog{lens: &lens}
	if _, err := Train(context.Background(), &algo.Runtime{Header: res.Header, Log: rec}, res.Spec, res.Config, Options{EnvWorkers: 2}); err != nil {
		t.Fatal(err)
	}
	if len(lens) != 960/10 || slices.ContainsFunc(lens, func(n int) bool { return n != 10 }) {
		t.Errorf("%d episodes of lengths %v; want 96 of 10 steps (one per agent and episode)", len(lens), lens)
	}
	if _, err := Train(context.Background(), &algo.Runtime{Header: res.Header, Log: algo.Discard()}, res.Spec, res.Config,
		Options{EnvWorkers: 5}); !errors.Is(err, ErrConfig) {
		t.Errorf("5 env workers for 4 envs: err %v, want ErrConfig", err)
	}
}

type episodeLog struct{ lens *[]int }

func (l *episodeLog) Episode(_ int64, _ float64, n int) { *l.lens = append(*l.lens, n) }
func (l *episodeLog) Scalar(string, float64)            {}
func (l *episodeLog) Step(int64)                        {}

const twoPolicies = `algo: ppo
env: mpe/simple_spread_v3?agent_id=true&max_cycles=10
seed: 5
steps: 960
log_every: 120
runtime: {executor: hts, env_workers: %d, policy_workers: %d}
multiagent:
  policies: [a, b]
  policy_mapping: {agent_0: a, "agent_*": b}
ppo: {num_envs: 12, num_steps: 20, num_minibatches: 2, update_epochs: 2, hidden: [16]}
`

// TestSeveralPoliciesSameBits is the HTS promise for a multiagent section:
// simple_spread's agent_0 has policy a and the other two agents policy b
// (4 envs × 3 agents), trained through algo.TrainRun as `herd train`
// does; the checkpoint (both policies) and metrics.csv's per-policy
// columns are the same bits for env workers 1 and 2 and policy workers 1
// and 4.
func TestSeveralPoliciesSameBits(t *testing.T) {
	exec := []algo.Executor{Executor()}
	run := func(e, p int) (model []byte, cols string) {
		t.Helper()
		res := resolve(t, ppo.Spec(), fmt.Sprintf(twoPolicies, e, p))
		res.Header.Out = t.TempDir()
		sum, err := algo.TrainRun(context.Background(), res, algo.RunOptions{Executors: exec, Dir: algo.DirForce})
		if err != nil {
			t.Fatalf("E=%d P=%d: %v", e, p, err)
		}
		if sum.Steps != 960 {
			t.Fatalf("E=%d P=%d: %d steps, want 960", e, p, sum.Steps)
		}
		if model, err = os.ReadFile(filepath.Join(res.Header.Out, algo.ModelFile)); err != nil {
			t.Fatal(err)
		}
		csv, err := os.ReadFile(filepath.Join(res.Header.Out, "metrics.csv"))
		if err != nil {
			t.Fatal(err)
		}
		return model, policyColumns(t, csv)
	}
	want, wantCols := run(1, 1)
	for _, c := range [][2]int{{1, 4}, {2, 1}, {2, 4}} {
		got, cols := run(c[0], c[1])
		if !bytes.Equal(got, want) {
			t.Errorf("E=%d P=%d: checkpoint differs from E=1 P=1's", c[0], c[1])
		}
		if cols != wantCols {
			t.Errorf("E=%d P=%d: policy columns\n%s\nwant (E=1 P=1)\n%s", c[0], c[1], cols, wantCols)
		}
	}
	// Two policies, each with its own parameters: a learned from agent_0's
	// 4 rows, b from the other 8.
	ck, err := nn.ReadSafetensors(bytes.NewReader(want))
	if err != nil {
		t.Fatal(err)
	}
	if got := ck.Metadata["herd.policies"]; got != "a,b" {
		t.Fatalf("checkpoint policies %q, want a,b", got)
	}
	var na, nb int
	for name := range ck.Tensors {
		switch {
		case strings.HasPrefix(name, "a/"):
			na++
		case strings.HasPrefix(name, "b/"):
			nb++
		}
	}
	if na == 0 || na != nb {
		t.Errorf("checkpoint tensors: %d of a, %d of b; want the same nonzero count", na, nb)
	}
	if !strings.Contains(wantCols, "policy/b/losses/value_loss") || strings.Count(wantCols, "\n") < 4 {
		t.Errorf("metrics.csv lacks per-policy rows:\n%s", wantCols)
	}
}

// policyColumns keeps the step and the policy/… columns of metrics.csv
// (the others include wall-clock times).
func policyColumns(t *testing.T, csv []byte) string {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(string(csv)), "\n")
	head := strings.Split(lines[0], ",")
	var keep []int
	for i, h := range head {
		if h == "step" || strings.HasPrefix(h, "policy/") {
			keep = append(keep, i)
		}
	}
	var b strings.Builder
	for _, l := range lines {
		f := strings.Split(l, ",")
		for _, i := range keep {
			if i < len(f) {
				b.WriteString(f[i] + ",")
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// TestOnePolicyMappingIsTheSharedPolicy: a multiagent section whose one
// policy acts for every agent trains the parameters of the plain
// shared-policy run, bit for bit (the same seed, rows and streams).
func TestOnePolicyMappingIsTheSharedPolicy(t *testing.T) {
	plain := "algo: ppo\nenv: mpe/simple_spread_v3?agent_id=true&max_cycles=10\nseed: 5\nsteps: 960\nruntime: {executor: hts}\n" +
		"ppo: {num_envs: 12, num_steps: 20, num_minibatches: 2, update_epochs: 2, hidden: [16]}\n"
	params := func(file string) []float32 {
		res := resolve(t, ppo.Spec(), file)
		m, err := Train(context.Background(), &algo.Runtime{Header: res.Header, Log: algo.Discard()}, res.Spec, res.Config, Options{EnvWorkers: 2, PolicyWorkers: 2})
		if err != nil {
			t.Fatal(err)
		}
		var out []float32
		for _, p := range m.(algo.ParamModel).Params() {
			out = append(out, p.Value...)
		}
		return out
	}
	want := params(plain)
	got := params(strings.Replace(plain, "runtime:", "multiagent: {policies: [all], policy_mapping: {\"agent_*\": all}}\nruntime:", 1))
	if !slices.Equal(got, want) {
		t.Errorf("one policy for every agent: %d parameters differ from the shared-policy run's", len(got))
	}
}

// TestTwoAlgorithmsSameBits: policy b trained by A2C (multiagent.algos)
// beside PPO's policy a, under the same barriers: same bits for E=1 P=1
// and E=4 P=2.
func TestTwoAlgorithmsSameBits(t *testing.T) {
	file := strings.Replace(fmt.Sprintf(twoPolicies, 1, 1), "ppo: {", "  algos: {b: a2c}\na2c: {num_envs: 12, num_steps: 20, hidden: [16]}\nppo: {", 1)
	res, err := algo.Resolve([]byte(file), []algo.Spec{ppo.Spec(), a2c.Spec()}, algo.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	hash := func(e, p int) string {
		m, err := Train(context.Background(), &algo.Runtime{Header: res.Header, Log: algo.Discard(), Others: res.Others}, res.Spec, res.Config,
			Options{EnvWorkers: e, PolicyWorkers: p})
		if err != nil {
			t.Fatal(err)
		}
		ps, ok := m.(*algo.Policies)
		if !ok || len(ps.Models) != 2 {
			t.Fatalf("model %T, want 2 policies", m)
		}
		path := filepath.Join(t.TempDir(), "model.safetensors")
		if err := m.Save(path); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		s := sha256.Sum256(b)
		return hex.EncodeToString(s[:])
	}
	if a, b := hash(1, 1), hash(4, 2); a != b {
		t.Errorf("E=4 P=2 checkpoint %s, E=1 P=1 %s", b, a)
	}
}

const signalPolicies = `algo: ppo
env: toy/signal_v0?targets=2&max_cycles=4%s
seed: 1
steps: 48000
log_every: 4000
runtime: {executor: hts, env_workers: %d, policy_workers: %d}
multiagent:
  policies: [speaker, listener]
  policy_mapping: {speaker_0: speaker, listener_0: listener}
ppo: {num_envs: 32, num_steps: 16, num_minibatches: 2, update_epochs: 4, hidden: [32], learning_rate: 3.0e-3, ent_coef: 0.01}
`

// TestMixedActionSpaces: toy/signal_v0's speaker (Discrete(2)) and
// listener (Discrete(3), or a Box of one value) train under HTS, each
// policy with a network of its own action space; the bits do not depend
// on the worker counts, and both policies learn the game.
func TestMixedActionSpaces(t *testing.T) {
	for _, c := range []struct {
		name, kw string
		want     float64 // the team's evaluation return: above guessing and a constant x (see run/multipolicy's TestMixedActionSpaces)
	}{{"discrete", "", 3}, {"box", "&continuous_listener=true", 4.5}} {
		t.Run(c.name, func(t *testing.T) {
			var first []byte
			for _, ep := range [][2]int{{1, 1}, {4, 2}} {
				res := resolve(t, ppo.Spec(), fmt.Sprintf(signalPolicies, c.kw, ep[0], ep[1]))
				res.Header.Out = t.TempDir()
				sum, err := algo.TrainRun(context.Background(), res, algo.RunOptions{Executors: []algo.Executor{Executor()},
					Dir: algo.DirForce, EvalEpisodes: 20})
				if err != nil {
					t.Fatal(err)
				}
				model, err := os.ReadFile(filepath.Join(res.Header.Out, algo.ModelFile))
				if err != nil {
					t.Fatal(err)
				}
				if first == nil {
					first = model
					if sum.EvalReturnMean < c.want {
						t.Errorf("team return %.2f after training, want ≥ %v", sum.EvalReturnMean, c.want)
					}
				} else if !bytes.Equal(model, first) {
					t.Errorf("E=%d P=%d: checkpoint differs from E=1 P=1's", ep[0], ep[1])
				}
			}
		})
	}
}
