package distexec_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"herd/algo"
	"herd/algo/algotest"
	"herd/algo/dqn"
	"herd/algo/ppo"
	"herd/internal/trainstate"
	"herd/run"
	"herd/run/distexec"
)

// The dist executor runs through algo.TrainRun like any other: the run
// directory gets its files and the summary counts every step and episode,
// on the in-process twin and on an embedded NATS server.
func TestTrainRun(t *testing.T) {
	for _, c := range []struct {
		tr     string
		groups int
	}{{"inproc", 0}, {"nats", 0}, {"nats", 2}} {
		t.Run(fmt.Sprintf("%s/groups=%d", c.tr, c.groups), func(t *testing.T) {
			dir := t.TempDir()
			h := algo.DefaultHeader()
			h.Algo, h.Env, h.Steps, h.Out, h.LogEvery = "fake", "CartPole-v1", 4*32*10, dir, 128
			h.Runtime = algo.RuntimeConfig{Executor: "dist", EnvWorkers: 2, PolicyWorkers: 2, Transport: c.tr, EnvGroups: c.groups}
			if err := h.Validate(); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			spec := algotest.Spec()
			res := &algo.Resolved{Header: h, Spec: spec, Config: spec.NewConfig()}
			sum, err := algo.TrainRun(ctx, res, algo.RunOptions{Executors: run.Executors()})
			if err != nil {
				t.Fatal(err)
			}
			if sum.Steps != h.Steps || sum.Episodes == 0 {
				t.Errorf("summary: %d steps (want %d), %d episodes", sum.Steps, h.Steps, sum.Episodes)
			}
			for _, f := range []string{"config.yaml", "metrics.csv", "summary.json", "model.safetensors"} {
				if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
					t.Error(err)
				}
			}
			// The policy workers' batches reach the learner's summary.
			b, err := os.ReadFile(filepath.Join(dir, "summary.json"))
			if err != nil {
				t.Fatal(err)
			}
			var sj struct{ Dist map[string]float64 }
			if err := json.Unmarshal(b, &sj); err != nil {
				t.Fatal(err)
			}
			if m, p99 := sj.Dist["dist/batch_rows_mean"], sj.Dist["dist/batch_rows_p99"]; m < 1 || p99 < 1 {
				t.Errorf("summary dist: batch rows mean %v, p99 %v; want ≥ 1 (every request has rows)", m, p99)
			}
			// No worker of a healthy run goes silent.
			if n, ok := sj.Dist["dist/silences"]; !ok || n != 0 || sj.Dist["dist/silent_workers"] != 0 {
				t.Errorf("summary dist: silences %v (reported %v), silent workers %v; want 0", n, ok, sj.Dist["dist/silent_workers"])
			}
		})
	}
}

func TestBadRuntime(t *testing.T) {
	for _, rc := range []algo.RuntimeConfig{
		{Executor: "dist", Transport: "carrier-pigeon"},
		{Executor: "local", Transport: "nats"},
		{Executor: "dist", NATSURL: "nats://127.0.0.1:1"},
		{Executor: "dist", Alpha: 3},
	} {
		err := rc.Validate()
		if err == nil { // a key of another executor's: refused when the run is admitted
			h := algo.DefaultHeader()
			h.Algo, h.Env, h.Steps, h.Runtime = "fake", "CartPole-v1", 4096, rc
			_, err = algo.AdmitRun(run.Executors(), &algo.Resolved{Header: h, Spec: algotest.Spec()})
		}
		if !errors.Is(err, algo.ErrConfig) {
			t.Errorf("%+v: %v, want ErrConfig", rc, err)
		}
	}
}

const dqnDist = `algo: dqn
env: CartPole-v1
seed: 3
steps: 3000
log_every: 500
runtime: {executor: dist, env_workers: 2, transport: %s}
dqn: {num_envs: 1, buffer_size: 2000, batch_size: 32, learning_starts: 500, train_frequency: 4, target_network_frequency: 100,
  net_arch: [16], prioritized: true, n_steps: 2, initial_priorities: actor}
`

// The off-policy (Ape-X) topology runs through algo.TrainRun on both
// transports: every step is learned from and episodes are reported.
func TestTrainRunOffPolicy(t *testing.T) {
	for _, tr := range []string{"inproc", "nats"} {
		t.Run(tr, func(t *testing.T) {
			res, sum := trainFile(t, fmt.Sprintf(dqnDist, tr), 60*time.Second, dqn.Spec())
			if sum.Steps != res.Header.Steps || sum.Episodes == 0 {
				t.Errorf("summary: %d steps (want %d), %d episodes", sum.Steps, res.Header.Steps, sum.Episodes)
			}
		})
	}
	// Off-policy env workers act with inline copies: policy workers are
	// refused rather than started idle.
	res, err := algo.Resolve([]byte(strings.Replace(fmt.Sprintf(dqnDist, "inproc"), "env_workers: 2", "env_workers: 2, policy_workers: 1", 1)),
		[]algo.Spec{dqn.Spec()}, algo.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := distexec.Prepare(res.Header, res.Spec, res.Config); err == nil || !strings.Contains(err.Error(), "inline policy copies") {
		t.Errorf("policy_workers with DQN: err %v", err)
	}
}

// TestMultiAgentOnPolicyRefused: the on-policy topology's env workers step
// single envs, so a multi-agent id is refused rather than trained on its
// turn view.
func TestMultiAgentOnPolicyRefused(t *testing.T) {
	res, err := algo.Resolve([]byte("algo: ppo\nenv: mpe/simple_spread_v3\nsteps: 3000\nruntime: {executor: dist}\nppo: {num_envs: 3}\n"), []algo.Spec{ppo.Spec()}, algo.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := distexec.Prepare(res.Header, res.Spec, res.Config); !errors.Is(err, algo.ErrConfig) || !strings.Contains(err.Error(), "multi-agent") {
		t.Fatalf("dist PPO on simple_spread: %v, want ErrConfig naming multi-agent", err)
	}
}

// runtime.env_groups must split num_envs into equal groups, belongs to the
// dist executor's on-policy topology, and is refused with a clear error
// otherwise.
func TestEnvGroupsValidation(t *testing.T) {
	spec := algotest.Spec()
	for _, c := range []struct {
		rc   algo.RuntimeConfig
		want string
	}{
		{algo.RuntimeConfig{Executor: "dist", EnvGroups: 3}, "must divide the 4 envs"},
		{algo.RuntimeConfig{Executor: "dist", EnvGroups: 8}, "must divide the 4 envs"},
		{algo.RuntimeConfig{Executor: "hts", EnvGroups: 2}, "runtime.env_groups is not a setting of executor hts"},
		{algo.RuntimeConfig{Executor: "dist", EnvGroups: -1}, "runtime.env_groups -1"},
	} {
		h := algo.DefaultHeader()
		h.Algo, h.Env, h.Steps = "fake", "CartPole-v1", 4096
		h.Runtime = c.rc
		err := h.Validate()
		if err == nil {
			_, err = algo.AdmitRun(run.Executors(), &algo.Resolved{Header: h, Spec: spec})
		}
		if err == nil {
			_, err = distexec.Prepare(h, spec, spec.NewConfig())
		}
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, algo.ErrConfig) {
			t.Errorf("%+v: got %v, want an ErrConfig saying %q", c.rc, err, c.want)
		}
	}
	h := algo.DefaultHeader()
	h.Algo, h.Env, h.Steps = "fake", "CartPole-v1", 4096
	h.Runtime = algo.RuntimeConfig{Executor: "dist", EnvGroups: 2}
	if _, err := distexec.Prepare(h, spec, spec.NewConfig()); err != nil {
		t.Errorf("2 groups of 4 envs: %v", err)
	}
}

// Under inline inference the on-policy topology runs through
// algo.TrainRun on both transports with no policy worker: every step is
// learned from, the lag is counted, and no inference batch is reported.
func TestTrainRunInline(t *testing.T) {
	for _, tr := range []string{"inproc", "nats"} {
		t.Run(tr, func(t *testing.T) {
			dir := t.TempDir()
			h := algo.DefaultHeader()
			h.Algo, h.Env, h.Steps, h.Out, h.LogEvery = "fake", "CartPole-v1", 4*32*10, dir, 128
			h.Runtime = algo.RuntimeConfig{Executor: "dist", EnvWorkers: 2, Inference: algo.InferenceInline, Transport: tr}
			if err := h.Validate(); err != nil {
				t.Fatal(err)
			}
			spec := algotest.Spec()
			st, err := distexec.Prepare(h, spec, spec.NewConfig())
			if err != nil {
				t.Fatal(err)
			}
			if n := st.PolicyWorkers(0); !st.Inline || n != 0 {
				t.Fatalf("inline setup: Inline %v, %d policy workers; want true and 0", st.Inline, n)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			res := &algo.Resolved{Header: h, Spec: spec, Config: spec.NewConfig()}
			sum, err := algo.TrainRun(ctx, res, algo.RunOptions{Executors: run.Executors()})
			if err != nil {
				t.Fatal(err)
			}
			if sum.Steps != h.Steps || sum.Episodes == 0 {
				t.Errorf("summary: %d steps (want %d), %d episodes", sum.Steps, h.Steps, sum.Episodes)
			}
			b, err := os.ReadFile(filepath.Join(dir, "summary.json"))
			if err != nil {
				t.Fatal(err)
			}
			var sj struct{ Dist map[string]float64 }
			if err := json.Unmarshal(b, &sj); err != nil {
				t.Fatal(err)
			}
			if m, ok := sj.Dist["dist/batch_rows_mean"]; !ok || m != 0 {
				t.Errorf("summary dist: batch rows mean %v (present %v); want 0: no policy worker ran", m, ok)
			}
			if _, ok := sj.Dist["dist/lag_mean"]; !ok {
				t.Error("summary dist: no dist/lag_mean")
			}
		})
	}
}

// runtime.inference takes policy_workers or inline, belongs to the dist
// executor, and inline refuses policy workers and env groups; the
// off-policy topology refuses policy_workers inference.
func TestInferenceValidation(t *testing.T) {
	spec := algotest.Spec()
	for _, c := range []struct {
		rc   algo.RuntimeConfig
		want string
	}{
		{algo.RuntimeConfig{Executor: "dist", Inference: "remote"}, `runtime.inference "remote" is not policy_workers or inline`},
		{algo.RuntimeConfig{Executor: "hts", Inference: "inline"}, "runtime.inference is not a setting of executor hts"},
		{algo.RuntimeConfig{Executor: "dist", Inference: "inline", PolicyWorkers: 1}, "leave policy_workers out"},
		{algo.RuntimeConfig{Executor: "dist", Inference: "inline", EnvGroups: 2}, "runtime.env_groups 2 with inference inline"},
	} {
		h := algo.DefaultHeader()
		h.Algo, h.Env, h.Steps = "fake", "CartPole-v1", 4096
		h.Runtime = c.rc
		err := h.Validate()
		if err == nil {
			_, err = algo.AdmitRun(run.Executors(), &algo.Resolved{Header: h, Spec: spec})
		}
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, algo.ErrConfig) {
			t.Errorf("%+v: got %v, want an ErrConfig saying %q", c.rc, err, c.want)
		}
		// Prepare refuses it too when handed an unvalidated header.
		if c.rc.Executor == "dist" && c.rc.Inference == "inline" {
			if _, err := distexec.Prepare(h, spec, spec.NewConfig()); !errors.Is(err, algo.ErrConfig) {
				t.Errorf("%+v: Prepare: %v, want ErrConfig", c.rc, err)
			}
		}
	}
	for _, inf := range []string{"", "policy_workers"} {
		h := algo.DefaultHeader()
		h.Algo, h.Env, h.Steps = "fake", "CartPole-v1", 4096
		h.Runtime = algo.RuntimeConfig{Executor: "dist", Inference: inf}
		st, err := distexec.Prepare(h, spec, spec.NewConfig())
		if err != nil || st.Inline || st.PolicyWorkers(0) != 1 {
			t.Errorf("inference %q: %v, want 1 policy worker", inf, err)
		}
	}
	res, err := algo.Resolve([]byte(strings.Replace(fmt.Sprintf(dqnDist, "inproc"), "env_workers: 2", "env_workers: 2, inference: policy_workers", 1)),
		[]algo.Spec{dqn.Spec()}, algo.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := distexec.Prepare(res.Header, res.Spec, res.Config); err == nil || !strings.Contains(err.Error(), "inline policy copies") {
		t.Errorf("inference policy_workers with DQN: err %v", err)
	}
}

// silenceSpy keeps the largest dist/silences a run logs.
type silenceSpy struct {
	algo.Logger
	silences, steps float64
}

func (s *silenceSpy) Scalar(name string, v float64) {
	if name == "dist/silences" {
		s.silences = max(s.silences, v)
	}
	s.Logger.Scalar(name, v)
}

func (s *silenceSpy) Step(step int64) {
	s.steps = float64(step)
	s.Logger.Step(step)
}

// No worker of a healthy run goes silent, with the bound at its 2 s floor
// (a 12 s stall bound) and the learner reading the workers' records
// every 5 s for 12 s.
func TestHealthyRunNoSilence(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 12 s")
	}
	h := algo.DefaultHeader()
	h.Algo, h.Env, h.Steps, h.Out, h.LogEvery = "fake", "CartPole-v1", 1<<40, t.TempDir(), 1<<20
	h.Runtime = algo.RuntimeConfig{Executor: "dist", EnvWorkers: 2, PolicyWorkers: 1, Transport: "inproc"}
	if err := h.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Second)
	defer cancel()
	spec := algotest.Spec()
	res := &algo.Resolved{Header: h, Spec: spec, Config: spec.NewConfig()}
	var notices strings.Builder
	spy := &silenceSpy{}
	dist := distexec.Executor()
	dist.Train = func(ctx context.Context, rt *algo.Runtime, spec algo.Spec, cfg algo.Config) (algo.Model, error) {
		opt := distexec.OptionsOf(rt.Header)
		opt.Stall, opt.Notice = 12*time.Second, &notices
		spy.Logger = rt.Log
		rt.Log = spy
		return distexec.Train(ctx, rt, spec, cfg, opt)
	}
	_, err := algo.TrainRun(ctx, res, algo.RunOptions{Executors: []algo.Executor{dist}})
	if err != nil && ctx.Err() == nil {
		t.Fatal(err)
	}
	if spy.steps == 0 {
		t.Fatal("the run learned nothing")
	}
	if spy.silences != 0 || notices.Len() != 0 {
		t.Errorf("dist/silences %v in a healthy run of %v steps; notices:\n%s", spy.silences, spy.steps, notices.String())
	}
}

// TestApeXStopSavesCheckpoint: an Ape-X learner stopped (Ctrl-C,
// SIGTERM: ctx) between its periodic checkpoints, here while it learns a
// sample, finishes that sample's updates and writes a checkpoint of its
// step, and reports a clean interruption (context.Canceled: exit status
// 130); the run resumed from it continues from that step to its end. When
// that checkpoint cannot be written, the stop is a failure (not
// context.Canceled: exit status 1).
func TestApeXStopSavesCheckpoint(t *testing.T) {
	res, err := algo.Resolve([]byte(fmt.Sprintf(dqnDist, "inproc")), []algo.Spec{dqn.Spec()}, algo.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	h := res.Header
	// The stop lands inside Learn: the learner wrapper cancels the run
	// when it is handed the sample that reaches the step.
	var stopLearn func(step int64)
	inner := res.Spec.Pieces
	res.Spec.Pieces = func(h algo.Header, cfg algo.Config, sp algo.Spaces) (*algo.Pieces, error) {
		p, err := inner(h, cfg, sp)
		if err != nil || p.NewTransitionLearner == nil {
			return p, err
		}
		newLearner, checkpoint := p.NewTransitionLearner, p.Checkpoint
		p.NewTransitionLearner = func() (algo.TransitionLearner, error) {
			l, err := newLearner()
			return &cancelLearn{TransitionLearner: l, at: func(step int64) {
				if stopLearn != nil {
					stopLearn(step)
				}
			}}, err
		}
		p.Checkpoint = func(l algo.TransitionLearner, rb algo.Replay) (algo.LearnerCheckpoint, error) {
			return checkpoint(l.(*cancelLearn).TransitionLearner, rb)
		}
		return p, nil
	}
	key, err := algo.ResumeConfig(res)
	if err != nil {
		t.Fatal(err)
	}
	newCK := func(dir string) *algo.Checkpoints {
		// No periodic checkpoint but the start's (step 0).
		return algo.NewCheckpoints(algo.CheckpointOptions{Dir: dir, Every: 1 << 40, Keep: 5, Algo: h.Algo, Env: h.Env, Config: key})
	}
	train := func(ck *algo.Checkpoints, stopAt int64, failSave func()) (int64, error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var stopped int64
		stopLearn = func(step int64) {
			if stopAt > 0 && stopped == 0 && step >= stopAt {
				stopped = step
				if failSave != nil {
					failSave()
				}
				cancel()
			}
		}
		m, err := distexec.Executor().Train(ctx, &algo.Runtime{Header: h, Log: algo.Discard(), Checkpoints: ck}, res.Spec, res.Config)
		if m == nil {
			t.Fatalf("no model: %v", err)
		}
		return stopped, err
	}
	dir := t.TempDir()
	stopped, err := train(newCK(dir), 1500, nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("stopped at step %d: %v, want context.Canceled", stopped, err)
	}
	st, _, _, err := algo.LoadCheckpoint(dir, h.Algo, h.Env, key)
	if err != nil {
		t.Fatal(err)
	}
	names, err := (trainstate.Dir{Path: dir}).List()
	if err != nil || st.Header.Step != stopped || len(names) != 2 {
		t.Fatalf("stopped at step %d: checkpoints %v, the newest at step %d; want the start's and the stop's", stopped, names, st.Header.Step)
	}
	ck := newCK(t.TempDir())
	ck.Resume(st)
	stopLearn = nil
	var steps stepLog
	if _, err := distexec.Executor().Train(context.Background(), &algo.Runtime{Header: h, Log: &steps, Checkpoints: ck}, res.Spec, res.Config); err != nil {
		t.Fatal(err)
	}
	if steps.first <= stopped || steps.last != h.Steps {
		t.Errorf("resumed from step %d: steps %d to %d, want past it to %d", stopped, steps.first, steps.last, h.Steps)
	}
	// The stop's checkpoint cannot be written: a file where its directory was.
	dir = t.TempDir()
	stopped, err = train(newCK(dir), 1500, func() { os.RemoveAll(dir); os.WriteFile(dir, nil, 0o644) })
	if err == nil || errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "not saved") {
		t.Fatalf("stopped at step %d with its checkpoint unsaved: %v, want a failure, not context.Canceled", stopped, err)
	}
}

// stepLog is a Logger that records the first and last metrics steps.
type stepLog struct{ first, last int64 }

func (l *stepLog) Episode(int64, float64, int) {}
func (l *stepLog) Scalar(string, float64)      {}
func (l *stepLog) Step(step int64) {
	if l.first == 0 {
		l.first = step
	}
	l.last = step
}

// cancelLearn calls at with the step of each Learn before learning.
type cancelLearn struct {
	algo.TransitionLearner
	at func(step int64)
}

func (l *cancelLearn) Learn(ctx context.Context, rb algo.Replay, prev, step int64) ([]algo.Stat, error) {
	l.at(step)
	return l.TransitionLearner.Learn(ctx, rb, prev, step)
}

func (l *cancelLearn) Model() algo.Model { return l.TransitionLearner.(algo.Modeler).Model() }
