package ddpg

import (
	"errors"
	"path/filepath"
	"strings"
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

// TestSmokeLearnsPendulum: a short run must clearly beat the untrained
// policy's deterministic return (≈ −1200 to −1500 on Pendulum-v1).
func TestSmokeLearnsPendulum(t *testing.T) {
	learntest.Smoke(t, Spec(), algo.Header{Env: "Pendulum-v1", Seed: 1, Steps: 4000}, smokeConfig(), 300)
}

// TestDeterministic: the same seed gives the same metrics.csv (wall-clock
// columns aside); another seed does not.
func TestDeterministic(t *testing.T) {
	h := algo.Header{Env: "Pendulum-v1", Seed: 5, Steps: 900, LogEvery: 100}
	a := learntest.MetricsCSV(t, Spec(), h, smokeConfig())
	b := learntest.MetricsCSV(t, Spec(), h, smokeConfig())
	h.Seed = 6
	c := learntest.MetricsCSV(t, Spec(), h, smokeConfig())
	if a != b {
		t.Errorf("same seed, different metrics.csv:\n%s\n---\n%s", a, b)
	}
	if a == c {
		t.Error("seeds 5 and 6 gave identical metrics.csv")
	}
}

func TestValidate(t *testing.T) {
	c := NewConfig()
	c.BatchSize, c.Tau, c.PolicyFrequency = 0, 0, 0
	err := c.Validate(algo.Header{Env: "CartPole-v1"})
	if !errors.Is(err, algo.ErrConfig) {
		t.Fatalf("Validate = %v, want ErrConfig", err)
	}
	for _, want := range []string{"batch_size", "tau", "policy_frequency", "Box"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate error does not mention %s: %v", want, err)
		}
	}
	if err := NewConfig().Validate(algo.Header{Env: "Pendulum-v1"}); err != nil {
		t.Errorf("defaults rejected: %v", err)
	}
}

// TestSaveLoadPolicy: the reloaded policy acts exactly as the trained one.
func TestSaveLoadPolicy(t *testing.T) {
	cfg := smokeConfig()
	h := algo.Header{Env: "Pendulum-v1", Seed: 2, Steps: 700}
	_, model := learntest.Run(t, Spec(), h, cfg, "")
	path := filepath.Join(t.TempDir(), "model.safetensors")
	if err := model.Save(path); err != nil {
		t.Fatal(err)
	}
	pol, err := LoadPolicy(path, h, cfg)
	if err != nil {
		t.Fatal(err)
	}
	a, b := make([]float32, 1), make([]float32, 1)
	for i := range 20 {
		obs := []float32{float32(i%5)*0.4 - 1, float32(i%3)*0.5 - 0.5, float32(i) - 10}
		if model.Act(a, obs)[0] != pol.Act(b, obs)[0] || a[0] < -2 || a[0] > 2 {
			t.Fatalf("obs %v: trained agent acts %v, reloaded %v (bounds ±2)", obs, a[0], b[0])
		}
	}
}

// BenchmarkSeeds is the 5-seed Pendulum learning check used while tuning
// configs/ddpg-pendulum.yaml (see docs/parts/offpolicy.bench.md).
func BenchmarkSeeds(b *testing.B) {
	learntest.Seeds(b, Spec(), "Pendulum-v1", 20000, func() algo.Config { return NewConfig() })
}

// TestNoAllocsPerStep: after setup, acting, storing and updating allocate
// nothing (STYLE: no allocation on hot paths).
func TestNoAllocsPerStep(t *testing.T) {
	cfg := smokeConfig()
	cfg.LearningStarts = 100
	a := learntest.AllocsPerStep(t, Spec(), algo.Header{Env: "Pendulum-v1", Seed: 1, Steps: 300}, cfg)
	t.Logf("%.4f allocations per step", a)
	if a > 0.01 {
		t.Errorf("%.3f allocations per step, want 0", a)
	}
}

func TestCancel(t *testing.T) {
	learntest.Cancel(t, Spec(), algo.Header{Env: "Pendulum-v1", Seed: 1}, smokeConfig())
}

// TestConfigsResolve: every configs/ddpg-*.yaml file resolves strictly.
func TestConfigsResolve(t *testing.T) {
	learntest.ResolveConfigs(t, Spec(), "../../configs/ddpg-*.yaml")
}
