package td3

import (
	"testing"

	"herd/algo"
	"herd/algo/internal/learntest"
)

// smokeConfig learns Pendulum's swing-up partly within a few thousand steps.
func smokeConfig() *Config {
	c := NewConfig()
	c.NetArch = []int{64, 64}
	c.BatchSize = 64
	c.LearningStarts = 500
	c.LearningRate = 1e-3
	c.Gamma = 0.98
	return c
}

// TestPendulum runs the shared continuous-control suite (learntest.Pendulum):
// smoke learning, determinism, save/load, no allocation per step,
// cancellation and the configs/td3-*.yaml files.
func TestPendulum(t *testing.T) {
	learntest.Pendulum{
		Spec:   Spec(),
		Config: func() algo.Config { return smokeConfig() },
		// OU noise, so that the noise process (and its reset at episode
		// ends) is covered too.
		Det: func() algo.Config {
			c := smokeConfig()
			c.NoiseType, c.ExplorationNoise = "ou", 0.5
			return c
		},
		SmokeSteps:     4000,
		LearningStarts: func(c algo.Config, n int) { c.(*Config).LearningStarts = n },
	}.Run(t)
}

func TestValidate(t *testing.T) {
	c := NewConfig()
	c.BatchSize, c.Tau, c.PolicyFrequency, c.NoiseType = 0, 0, 0, "pink"
	learntest.ConfigError(t, c.Validate(algo.Header{Env: "CartPole-v1"}), "batch_size", "tau", "policy_frequency", "noise_type", "Box")
	if err := NewConfig().Validate(algo.Header{Env: "Pendulum-v1"}); err != nil {
		t.Errorf("defaults rejected: %v", err)
	}
}

// BenchmarkSeeds is the 5-seed Pendulum learning check used while tuning
// configs/td3-pendulum.yaml (see docs/BENCHMARKS.md).
func BenchmarkSeeds(b *testing.B) {
	learntest.Seeds(b, Spec(), "Pendulum-v1", 20000, func() algo.Config { return NewConfig() })
}

// BenchmarkSeedsMCC is the MountainCarContinuous learning check used for
// configs/td3-mountaincarcontinuous.yaml.
func BenchmarkSeedsMCC(b *testing.B) {
	learntest.Seeds(b, Spec(), "MountainCarContinuous-v0", 100000, func() algo.Config { return NewConfig() })
}
