package dqn

import (
	"context"
	"errors"
	"testing"
	"time"

	"herd/algo"
	"herd/algo/internal/learntest"
	"herd/metrics"
)

// run trains DQN through learntest with the header's algo filled in.
func run(t testing.TB, h algo.Header, cfg *Config, dir string) (*metrics.Recorder, algo.Model) {
	t.Helper()
	return learntest.Run(t, Spec(), h, cfg, dir)
}

// smokeConfig learns CartPole in a few thousand steps: frequent small
// updates, a fast ε decay and a short warm-up (Stable-Baselines3 zoo style,
// scaled down).
func smokeConfig() *Config {
	c := NewConfig()
	c.LearningRate = 1e-3
	c.BufferSize = 10000
	c.BatchSize = 64
	c.LearningStarts = 500
	c.TrainFrequency = 1
	c.TargetNetworkFrequency = 100
	c.ExplorationFraction = 0.3
	c.NetArch = []int{64, 64}
	return c
}

// TestSmokeLearnsCartPole checks learning progress on a tiny budget: the
// last episodes of a 6k-step run must be far longer than a random policy's
// (≈ 22 steps on CartPole-v1). cleanrl tests/test_classic_control.py runs
// each script for a few steps; here the budget is enough to see learning.
func TestSmokeLearnsCartPole(t *testing.T) {
	for _, variant := range []struct {
		name string
		mod  func(*Config)
	}{
		{"dqn", func(*Config) {}},
		{"double-prioritized-3step-huber", func(c *Config) {
			c.DoubleQ, c.Prioritized, c.NSteps, c.Loss = true, true, 3, "huber"
		}},
		{"prioritized-actor-3step", func(c *Config) {
			c.Prioritized, c.NSteps, c.InitialPriorities = true, 3, PrioritiesActor
		}},
	} {
		t.Run(variant.name, func(t *testing.T) {
			cfg := smokeConfig()
			variant.mod(cfg)
			rec, _ := run(t, algo.Header{Algo: "dqn", Env: "CartPole-v1", Seed: 1, Steps: 6000}, cfg, "")
			mean, _, n := rec.ReturnStats()
			t.Logf("%s: mean return of the last %d episodes: %.1f", variant.name, n, mean)
			if !(mean > 60) {
				t.Errorf("mean return of the last episodes = %.1f after 6k steps, want > 60 (random ≈ 22)", mean)
			}
		})
	}
}

// TestDeterministic runs the same seed twice and compares metrics.csv with
// the wall-clock columns removed: every other byte must match. A third run
// with another seed must differ, so the comparison can fail.
func TestDeterministic(t *testing.T) {
	cfg := smokeConfig()
	cfg.DoubleQ, cfg.Prioritized, cfg.NSteps = true, true, 2
	h := algo.Header{Env: "CartPole-v1", Seed: 7, Steps: 1500, LogEvery: 100}
	learntest.Deterministic(t, Spec(), h, cfg, 11)
}

func TestValidate(t *testing.T) {
	c := NewConfig()
	c.BatchSize = 0
	c.Loss = "l1"
	c.Tau = 2
	c.NetArch = nil
	learntest.ConfigError(t, c.Validate(algo.Header{Env: "Pendulum-v1"}), "batch_size", "loss", "tau", "net_arch", "Discrete")
	if err := NewConfig().Validate(algo.Header{Env: "CartPole-v1"}); err != nil {
		t.Errorf("defaults rejected: %v", err)
	}
}

// TestSaveLoadPolicy saves a trained agent and checks the reloaded policy
// acts identically.
func TestSaveLoadPolicy(t *testing.T) {
	learntest.SaveLoad(t, Spec(), algo.Header{Algo: "dqn", Env: "CartPole-v1", Seed: 3, Steps: 1000}, smokeConfig(), 1, 50,
		func(i int) []float32 {
			return []float32{float32(i%7) * 0.01, -0.2 + float32(i)*0.01, 0.05 - float32(i%5)*0.02, float32(i%3) - 1}
		}, 0, 1)
}

// TestCancel checks that Train stops promptly on cancellation and returns
// the model with ctx.Err().
func TestCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	h := algo.Header{Algo: "dqn", Env: "CartPole-v1", Seed: 1, Steps: 1e9}
	h.EnsureDefaults()
	start := time.Now()
	model, err := Train(ctx, &algo.Runtime{Header: h, Log: algo.Discard()}, NewConfig())
	if !errors.Is(err, context.Canceled) || model == nil {
		t.Fatalf("Train on a cancelled context = %v, %v; want a model and context.Canceled", model, err)
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("cancellation took %v", time.Since(start))
	}
}

// BenchmarkTrainCleanRL runs CleanRL's full CartPole configuration (500k
// steps): `go test -run - -bench TrainCleanRL -benchtime 1x ./algo/dqn`.
// It reports env steps per second and the final mean return.
func BenchmarkTrainCleanRL(b *testing.B) {
	for b.Loop() {
		start := time.Now()
		rec, _ := run(b, algo.Header{Algo: "dqn", Env: "CartPole-v1", Seed: 1, Steps: 500000}, NewConfig(), "")
		mean, _, _ := rec.ReturnStats()
		b.ReportMetric(500000/time.Since(start).Seconds(), "steps/s")
		b.ReportMetric(mean, "return")
	}
}

// BenchmarkSeeds is the multi-seed learning check used while tuning
// (HERD_SET, HERD_STEPS, HERD_SEEDS, HERD_BENCH_OUT; see learntest.Seeds).
func BenchmarkSeeds(b *testing.B) {
	learntest.Seeds(b, Spec(), "CartPole-v1", 500000, func() algo.Config { return NewConfig() })
}

// TestNoAllocsPerStep: after setup, acting, storing and training allocate
// nothing: the hot path allocates nothing.
func TestNoAllocsPerStep(t *testing.T) {
	cfg := smokeConfig()
	cfg.LearningStarts = 200
	cfg.Prioritized, cfg.DoubleQ, cfg.NSteps = true, true, 3
	learntest.NoAllocs(t, Spec(), algo.Header{Env: "CartPole-v1", Seed: 1, Steps: 600}, cfg)
}

// BenchmarkStep measures one DQN step in steady state with CleanRL's
// network and batch: one env step plus, every step here (train_frequency
// 1, to isolate the update cost), one gradient step at batch 128.
func BenchmarkStep(b *testing.B) {
	cfg := NewConfig()
	cfg.LearningStarts, cfg.TrainFrequency = 1000, 1
	h := algo.Header{Algo: "dqn", Env: "CartPole-v1", Seed: 1}
	b.ReportAllocs()
	for b.Loop() {
		h.Steps = 1000 + 2000
		h.EnsureDefaults()
		if _, err := Train(context.Background(), &algo.Runtime{Header: h, Log: algo.Discard()}, cfg); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*2000), "ns/update")
}

// TestConfigsResolve: every configs/dqn-*.yaml file resolves strictly.
func TestConfigsResolve(t *testing.T) {
	learntest.ResolveConfigs(t, Spec(), "../../configs/dqn-*.yaml")
}
