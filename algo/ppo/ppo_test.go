package ppo

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"herd/algo"
	"herd/algo/internal/learntest"
	"herd/algo/internal/onpolicy"
	"herd/env"
	"herd/internal/rng"
	"herd/nn"
	"herd/rollout"
	"herd/sample"
)

// TestPPOLearnsCartPole is the smoke test (cleanrl
// tests/test_classic_control.py in spirit, but asserting progress): 16k
// steps, the learning rate annealed over them, at least double CartPole's
// mean return, which is ≈22 for a random policy. The full 500k-step target
// is `herd bench learn` (docs/BENCHMARKS.md).
func TestPPOLearnsCartPole(t *testing.T) {
	for _, seed := range []string{"1"} {
		res := learntest.Resolve(t, Spec(), "algo: ppo\nenv: CartPole-v1\nsteps: 16384\nseed: "+seed+"\n")
		sum, err := algo.TrainRun(context.Background(), res, algo.RunOptions{NoFiles: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("seed %s: return_mean_100 %.1f after %d steps, %d episodes", seed, sum.FinalReturnMean100, sum.Steps, sum.Episodes)
		if !(sum.FinalReturnMean100 > 40) {
			t.Errorf("seed %s: mean return %.1f after %d steps, want > 40 (random ≈ 22)", seed, sum.FinalReturnMean100, sum.Steps)
		}
	}
}

// TestPPOContinuousSmoke runs the Gaussian head on Pendulum: it must train
// without error and act within the bounds.
func TestPPOContinuousSmoke(t *testing.T) {
	res := learntest.Resolve(t, Spec(), "algo: ppo\nenv: Pendulum-v1\nsteps: 2048\nppo:\n  num_envs: 2\n  num_steps: 256\n  num_minibatches: 8\n")
	agent, err := Train(context.Background(), &algo.Runtime{Header: res.Header, Log: algo.Discard()}, res.Config.(*Config))
	if err != nil {
		t.Fatal(err)
	}
	if agent.NActions != 0 || agent.ActDim != 1 {
		t.Fatalf("agent for Pendulum: %d actions, dim %d", agent.NActions, agent.ActDim)
	}
	act := make([]float32, 1)
	for _, th := range []float32{-1, 0, 1} {
		a := agent.Act(act, []float32{th, 1 - th*th, 8 * th})
		if a[0] < -2 || a[0] > 2 {
			t.Fatalf("action %v out of Pendulum's [-2, 2]", a)
		}
	}
}

// TestPPODeterministic: the same seed gives an identical metrics.csv (wall
// columns aside) and identical weights; another seed does not.
func TestPPODeterministic(t *testing.T) {
	run := func(seed string) (string, []byte) {
		return learntest.TrainFiles(t, learntest.Resolve(t, Spec(), "algo: ppo\nenv: CartPole-v1\nsteps: 2048\nlog_every: 256\nseed: "+seed+"\n"))
	}
	a, ma := run("3")
	b, mb := run("3")
	c, _ := run("4")
	if strings.Count(a, "\n") != 5 { // header + 4 rows, one per 512-step iteration
		t.Fatalf("metrics.csv has %d lines:\n%s", strings.Count(a, "\n"), a)
	}
	if a != b {
		t.Fatalf("same seed, different metrics:\n%s\n---\n%s", a, b)
	}
	if !bytes.Equal(ma, mb) {
		t.Fatal("same seed, different model.safetensors")
	}
	if a == c {
		t.Fatal("different seeds gave identical metrics")
	}
}

// cancelAfter cancels its context at the n-th Step, as Ctrl-C would.
type cancelAfter struct {
	algo.Logger
	n      int
	cancel context.CancelFunc
	steps  int
}

func (c *cancelAfter) Step(step int64) {
	c.steps++
	if c.steps == c.n {
		c.cancel()
	}
}

// TestPPOCancelReturnsModel: cancellation stops training at the next
// iteration and hands back the model so the caller can save it.
func TestPPOCancelReturnsModel(t *testing.T) {
	res := learntest.Resolve(t, Spec(), "algo: ppo\nenv: CartPole-v1\nsteps: 1000000\n")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := &cancelAfter{Logger: algo.Discard(), n: 3, cancel: cancel}
	model, err := res.Spec.Train(ctx, &algo.Runtime{Header: res.Header, Log: log}, res.Config)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if model == nil || log.steps != 3 {
		t.Fatalf("model %v after %d iterations; want the model after 3", model, log.steps)
	}
	// TrainRun saves the checkpoint of an interrupted run.
	dir := t.TempDir()
	res.Header.Out = dir
	ctx2, cancel2 := context.WithCancel(context.Background())
	cancel2()
	sum, err := algo.TrainRun(ctx2, res, algo.RunOptions{})
	if !errors.Is(err, context.Canceled) || !sum.Interrupted {
		t.Fatalf("TrainRun: %v, interrupted=%v", err, sum.Interrupted)
	}
	for _, f := range []string{"config.yaml", "metrics.csv", "summary.json", "curve.png", "model.safetensors"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("interrupted run lacks %s: %v", f, err)
		}
	}
}

// TestPPOEvalRoundTrip: the saved checkpoint reloads into a policy that acts
// exactly as the trained agent does.
func TestPPOEvalRoundTrip(t *testing.T) {
	dir := t.TempDir()
	res := learntest.Resolve(t, Spec(), "algo: ppo\nenv: CartPole-v1\nsteps: 2048\nout: "+dir+"\n")
	rt := &algo.Runtime{Header: res.Header, Log: algo.Discard()}
	agent, err := Train(context.Background(), rt, res.Config.(*Config))
	if err != nil {
		t.Fatal(err)
	}
	p, path := learntest.Reload(t, Spec(), agent, res.Header, res.Config)
	want, err := algo.Evaluate(context.Background(), agent, env.Maker{}, "CartPole-v1", 3, 9)
	if err != nil {
		t.Fatal(err)
	}
	got, err := algo.Evaluate(context.Background(), p, env.Maker{}, "CartPole-v1", 3, 9)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("episode %d: reloaded policy %v, trained agent %v", i, got, want)
		}
	}
	// A corrupt checkpoint is an error, not a panic.
	if err := os.WriteFile(path, []byte("not safetensors"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadPolicy(path, res.Header, res.Config); err == nil {
		t.Fatal("want an error for a corrupt checkpoint")
	}
}

func TestPPOValidate(t *testing.T) {
	_, err := algo.Resolve([]byte("algo: ppo\nenv: CartPole-v1\nsteps: 100\nppo:\n  num_minibatches: 3\n  gamma: 2\n  activation: swish\n  hidden: []\n"),
		[]algo.Spec{Spec()}, algo.Overrides{})
	learntest.ConfigError(t, err, "num_minibatches (3)", "gamma", "swish", "hidden", "steps (100)")
	res := learntest.Resolve(t, Spec(), "algo: ppo\nenv: NoSuchEnv-v0\nsteps: 1000\n")
	if _, err := Train(context.Background(), &algo.Runtime{Header: res.Header, Log: algo.Discard()}, res.Config.(*Config)); err == nil {
		t.Fatal("want an error for an unknown env")
	}
	// The pieces refuse a config of another type and spaces they cannot serve.
	cartPole := algo.Spaces{Obs: env.UniformBox(-1, 1, 4), Act: env.Discrete{N: 2}}
	if _, err := Spec().Pieces(res.Header, nil, cartPole); !errors.Is(err, algo.ErrConfig) {
		t.Fatalf("nil config: %v", err)
	}
	if _, err := Spec().Pieces(res.Header, res.Config, algo.Spaces{Obs: env.Discrete{N: 3}, Act: env.Discrete{N: 2}}); !errors.Is(err, onpolicy.ErrSpace) {
		t.Fatalf("Discrete observations: %v", err)
	}
}

// TestPPOParallelSameResults: computing the actor's and the critic's passes
// on two goroutines changes nothing in the results.
func TestPPOParallelSameResults(t *testing.T) {
	run := func(parallel string) []byte {
		_, model := learntest.TrainFiles(t, learntest.Resolve(t, Spec(), "algo: ppo\nenv: CartPole-v1\nsteps: 2048\n", "parallel="+parallel))
		return model
	}
	if !bytes.Equal(run("true"), run("false")) {
		t.Fatal("parallel and sequential training gave different weights")
	}
}

// TestPPOSameBitsAsBefore: the local executor over the pieces trains
// bit-identical weights and metrics to the loop before the pieces
// (testdata/bits.txt: Categorical and Gaussian heads, parallel and not,
// KL early stop, truncations, ReLU).
func TestPPOSameBitsAsBefore(t *testing.T) {
	learntest.Bits(t, Spec(), "testdata/bits.txt", "native-avx2")
}

// TestFollowMatchesVersions: the local executor's hand-off (the policy
// reads the learner's live parameters, Policy.Follow) acts exactly as
// handing a weight version over after every Learn (what the other
// executors do): the same segments, versions and final weights.
func TestFollowMatchesVersions(t *testing.T) {
	res := learntest.Resolve(t, Spec(), "algo: ppo\nenv: CartPole-v1\nsteps: 1024\nppo:\n  num_steps: 64\n")
	h, cfg := res.Header, res.Config.(*Config)
	run := func(follow bool) ([]*sample.Segment, []*nn.Param) {
		envs, err := env.MakeVector(h.Env, cfg.NumEnvs, env.Sync, env.WithEpisodeStatistics())
		if err != nil {
			t.Fatal(err)
		}
		defer envs.Close()
		pc, err := Pieces(h, cfg, algo.SpacesOf(envs))
		if err != nil {
			t.Fatal(err)
		}
		pn, _ := pc.NewPolicy()
		s, _ := pc.NewSampler(cfg.NumEnvs, rng.New(h.Seed, "env-worker", 0))
		l, err := newLearner(h, cfg, algo.SpacesOf(envs))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		policy := pn.(*onpolicy.Policy)
		if follow {
			if err := policy.Follow(l.Learner); err != nil {
				t.Fatal(err)
			}
		}
		w := rollout.NewSegments(0, envs, rollout.NewInline(policy, s), cfg.Gamma)
		if err := w.Reset(1); err != nil {
			t.Fatal(err)
		}
		var segs []*sample.Segment
		for range 3 {
			seg := sample.NewSegment(cfg.NumSteps, cfg.NumEnvs, 4, 1)
			if err := w.Collect(seg); err != nil {
				t.Fatal(err)
			}
			if _, err := l.Learn(context.Background(), seg); err != nil {
				t.Fatal(err)
			}
			if !follow {
				if err := policy.SetWeights(l.Weights()); err != nil {
					t.Fatal(err)
				}
			}
			segs = append(segs, seg)
		}
		return segs, l.Agent.Params()
	}
	fa, pa := run(true)
	va, pb := run(false)
	for i := range fa {
		a, _ := fa[i].AppendEncode(nil)
		b, _ := va[i].AppendEncode(nil)
		if !bytes.Equal(a, b) || fa[i].Version != uint64(i) {
			t.Fatalf("segment %d (version %d, %d) differs between Follow and versions", i, fa[i].Version, va[i].Version)
		}
	}
	for i := range pa {
		if !slices.Equal(pa[i].Value, pb[i].Value) {
			t.Fatalf("%s differs after 3 iterations", pa[i].Name)
		}
	}
}

// TestLearnsProbes trains PPO on the probe envs (herd/env/probe) from
// three seeds and checks that it learns them (learntest.Probe): the
// one-step bandit tests the clipped surrogate's sign; the corridor, paid
// only at its end five steps from the start, with segments of one step
// tests that GAE bootstraps from the critic, and with segments of two
// steps its λ-returns. Advantages are not normalised: a batch that saw no
// reward would otherwise turn its noise into unit-sized pushes.
func TestLearnsProbes(t *testing.T) {
	learntest.ProbeSegments(t, Spec(), "algo: ppo\nenv: %s\nsteps: 6000\nppo: {num_envs: 8, num_steps: %d, num_minibatches: 1, "+
		"anneal_lr: false, norm_adv: false, learning_rate: 0.01, gamma: 0.9, hidden: [16]}\n", 2)
}
