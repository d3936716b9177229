package a2c

import (
	"context"
	"errors"
	"strings"
	"testing"

	"herd/algo"
	"herd/algo/internal/learntest"
)

// TestA2CLearnsCartPole is the smoke test: with the zoo setting (8 envs,
// ent_coef 0) 20k steps lift CartPole's mean return far above a random
// policy's ≈22.
func TestA2CLearnsCartPole(t *testing.T) {
	res := learntest.Resolve(t, Spec(), "algo: a2c\nenv: CartPole-v1\nsteps: 20000\na2c:\n  num_envs: 8\n")
	sum, err := algo.TrainRun(context.Background(), res, algo.RunOptions{NoFiles: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("return_mean_100 %.1f after %d steps", sum.FinalReturnMean100, sum.Steps)
	if !(sum.FinalReturnMean100 > 60) {
		t.Fatalf("mean return %.1f after %d steps, want > 60 (random ≈ 22)", sum.FinalReturnMean100, sum.Steps)
	}
}

// TestA2CDeterministic: same seed, same metrics.csv (wall columns aside).
func TestA2CDeterministic(t *testing.T) {
	run := func() string {
		csv, _ := learntest.TrainFiles(t, learntest.Resolve(t, Spec(), "algo: a2c\nenv: CartPole-v1\nsteps: 2000\nlog_every: 200\na2c:\n  num_envs: 4\n"))
		return csv
	}
	a, b := run(), run()
	if a != b || strings.Count(a, "\n") != 11 {
		t.Fatalf("runs differ or wrong row count:\n%s\n---\n%s", a, b)
	}
}

// TestA2CContinuousAndAdam: Box actions with the Adam option train without
// error, and the reloaded policy acts like the trained one.
func TestA2CContinuousAndAdam(t *testing.T) {
	res := learntest.Resolve(t, Spec(), "algo: a2c\nenv: Pendulum-v1\nsteps: 400\na2c:\n  use_rms_prop: false\n  norm_adv: true\n  anneal_lr: true\n")
	agent, err := Train(context.Background(), &algo.Runtime{Header: res.Header, Log: algo.Discard()}, res.Config.(*Config))
	if err != nil {
		t.Fatal(err)
	}
	p, _ := learntest.Reload(t, Spec(), agent, res.Header, res.Config)
	obs := []float32{0.5, 0.5, 1}
	a1 := agent.Act(make([]float32, 1), obs)
	a2 := p.Act(make([]float32, 1), obs)
	if a1[0] != a2[0] || a1[0] < -2 || a1[0] > 2 {
		t.Fatalf("trained %v, reloaded %v", a1, a2)
	}
}

func TestA2CValidate(t *testing.T) {
	_, err := algo.Resolve([]byte("algo: a2c\nenv: CartPole-v1\nsteps: 3\na2c:\n  num_envs: 0\n  learning_rate: 0\n  gae_lambda: 2\n"),
		[]algo.Spec{Spec()}, algo.Overrides{})
	learntest.ConfigError(t, err, "num_envs", "learning_rate", "gae_lambda")
	if _, err := Spec().Train(context.Background(), &algo.Runtime{Log: algo.Discard()}, nil); !errors.Is(err, algo.ErrConfig) {
		t.Fatalf("nil config: %v", err)
	}
	if _, err := Spec().Pieces(algo.Header{}, nil, algo.Spaces{}); !errors.Is(err, algo.ErrConfig) {
		t.Fatalf("pieces, nil config: %v", err)
	}
}

// TestA2CSameBitsAsBefore: the local executor over the pieces trains
// bit-identical weights and metrics to the loop before the pieces
// (testdata/bits.txt: RMSprop and Adam, Categorical and Gaussian heads).
func TestA2CSameBitsAsBefore(t *testing.T) {
	learntest.Bits(t, Spec(), "testdata/bits.txt", "native-avx2")
}

// TestLearnsProbes trains A2C on the probe envs (herd/env/probe) from
// three seeds and checks that it learns them (learntest.Probe): the
// one-step bandit tests the policy gradient; the corridor, paid only at
// its end five steps from the start, with segments of one step (every
// return is r + γ·V(x')) tests that the value bootstrap carries the
// credit back, and with segments of two steps the n-step returns.
func TestLearnsProbes(t *testing.T) {
	learntest.ProbeSegments(t, Spec(), "algo: a2c\nenv: %s\nsteps: 6000\n"+
		"a2c: {num_envs: 4, num_steps: %d, learning_rate: 0.01, gamma: 0.9, ent_coef: 0.01, hidden: [16]}\n", 2)
}

// TestA2CSharedEncoder: A2C with one MinAtar encoder for both heads
// (shared_encoder) trains on MinAtar Breakout deterministically, and its
// model has the one encoder.
func TestA2CSharedEncoder(t *testing.T) {
	const cfg = "algo: a2c\nenv: MinAtar/Breakout-v1\nsteps: 400\nlog_every: 100\na2c:\n  encoder: minatar\n  shared_encoder: true\n  hidden: [16]\n  num_envs: 4\n"
	run := func() string {
		csv, _ := learntest.TrainFiles(t, learntest.Resolve(t, Spec(), cfg))
		return csv
	}
	if a, b := run(), run(); a != b || strings.Count(a, "\n") != 5 {
		t.Fatalf("runs differ or wrong row count:\n%s\n---\n%s", a, b)
	}
	res := learntest.Resolve(t, Spec(), cfg)
	agent, err := Train(context.Background(), &algo.Runtime{Header: res.Header, Log: algo.Discard()}, res.Config.(*Config))
	if err != nil {
		t.Fatal(err)
	}
	if p := agent.Params(); p[0].Name != "network.0.weight" || p[len(p)-1].Name != "critic.bias" {
		t.Fatalf("params %s … %s, want network.0.weight … critic.bias", p[0].Name, p[len(p)-1].Name)
	}
}
