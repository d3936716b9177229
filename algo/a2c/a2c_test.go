package a2c

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"herd/algo"
	"herd/metrics"
)

func resolve(t *testing.T, file string) *algo.Resolved {
	t.Helper()
	res, err := algo.Resolve([]byte(file), []algo.Spec{Spec()}, algo.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestA2CLearnsCartPole is the smoke test: with the zoo setting (8 envs,
// ent_coef 0) 20k steps lift CartPole's mean return far above a random
// policy's ≈22.
func TestA2CLearnsCartPole(t *testing.T) {
	res := resolve(t, "algo: a2c\nenv: CartPole-v1\nsteps: 20000\na2c:\n  num_envs: 8\n")
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
		dir := t.TempDir()
		res := resolve(t, "algo: a2c\nenv: CartPole-v1\nsteps: 2000\nlog_every: 200\nout: "+dir+"\na2c:\n  num_envs: 4\n")
		if _, err := algo.TrainRun(context.Background(), res, algo.RunOptions{}); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, "metrics.csv"))
		if err != nil {
			t.Fatal(err)
		}
		s, err := metrics.DropWallColumns(b)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, b := run(), run()
	if a != b || strings.Count(a, "\n") != 11 {
		t.Fatalf("runs differ or wrong row count:\n%s\n---\n%s", a, b)
	}
}

// TestA2CContinuousAndAdam: Box actions with the Adam option train without
// error, and the reloaded policy acts like the trained one.
func TestA2CContinuousAndAdam(t *testing.T) {
	dir := t.TempDir()
	res := resolve(t, "algo: a2c\nenv: Pendulum-v1\nsteps: 400\na2c:\n  use_rms_prop: false\n  norm_adv: true\n  anneal_lr: true\n")
	agent, err := Train(context.Background(), &algo.Runtime{Header: res.Header, Log: algo.Discard()}, res.Config.(*Config))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, algo.ModelFile)
	if err := agent.Save(path); err != nil {
		t.Fatal(err)
	}
	p, err := LoadPolicy(path, res.Header, res.Config)
	if err != nil {
		t.Fatal(err)
	}
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
	if !errors.Is(err, algo.ErrConfig) {
		t.Fatalf("want ErrConfig, got %v", err)
	}
	for _, want := range []string{"num_envs", "learning_rate", "gae_lambda"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q: %v", want, err)
		}
	}
	if _, err := Spec().Train(context.Background(), &algo.Runtime{Log: algo.Discard()}, nil); !errors.Is(err, algo.ErrConfig) {
		t.Fatalf("nil config: %v", err)
	}
}
