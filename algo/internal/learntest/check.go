package learntest

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

// Deterministic trains spec twice with h and once with h.Seed+1 and checks
// that the same seed gives the same metrics.csv (wall-clock columns aside)
// and the other seed does not, so that the comparison can fail. The csv
// must have at least minLines lines (header included).
func Deterministic(t *testing.T, spec algo.Spec, h algo.Header, cfg algo.Config, minLines int) {
	t.Helper()
	a := MetricsCSV(t, spec, h, cfg)
	b := MetricsCSV(t, spec, h, cfg)
	h.Seed++
	c := MetricsCSV(t, spec, h, cfg)
	if a != b {
		t.Errorf("same seed, different metrics.csv:\n%s\n---\n%s", a, b)
	}
	if a == c {
		t.Errorf("seeds %d and %d gave identical metrics.csv; the comparison cannot detect anything", h.Seed-1, h.Seed)
	}
	if n := strings.Count(a, "\n") + 1; n < minLines {
		t.Errorf("metrics.csv has %d lines, want ≥ %d:\n%s", n, minLines, a)
	}
}

// ConfigError checks that err wraps algo.ErrConfig and mentions every one
// of wants.
func ConfigError(t *testing.T, err error, wants ...string) {
	t.Helper()
	if !errors.Is(err, algo.ErrConfig) {
		t.Fatalf("error = %v, want ErrConfig", err)
	}
	for _, want := range wants {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q: %v", want, err)
		}
	}
}

// SaveLoad trains spec on h, saves the model, reloads it with
// spec.LoadPolicy and checks that both act identically on obs(0) …
// obs(n−1), with every action value inside [low, high].
func SaveLoad(t *testing.T, spec algo.Spec, h algo.Header, cfg algo.Config, actDim, n int,
	obs func(i int) []float32, low, high float32) {
	t.Helper()
	_, model := Run(t, spec, h, cfg, "")
	pol, _ := Reload(t, spec, model, h, cfg)
	a, b := make([]float32, actDim), make([]float32, actDim)
	for i := range n {
		o := obs(i)
		model.Act(a, o)
		pol.Act(b, o)
		for j := range a {
			if a[j] != b[j] || a[j] < low || a[j] > high {
				t.Fatalf("obs %v: trained agent acts %v, reloaded %v (bounds [%v, %v])", o, a, b, low, high)
			}
		}
	}
}

// NoAllocs checks that spec's training loop allocates nothing per step in
// steady state (AllocsPerStep ≤ 0.01; skipped under -race).
func NoAllocs(t *testing.T, spec algo.Spec, h algo.Header, cfg algo.Config) {
	t.Helper()
	a := AllocsPerStep(t, spec, h, cfg)
	t.Logf("%.4f allocations per step", a)
	if a > 0.01 {
		t.Errorf("%.3f allocations per step, want 0", a)
	}
}

// Resolve builds a run from a config file body and --set overrides against
// spec alone, as `herd train` does.
func Resolve(t *testing.T, spec algo.Spec, file string, set ...string) *algo.Resolved {
	t.Helper()
	res, err := algo.Resolve([]byte(file), []algo.Spec{spec}, algo.Overrides{Set: set})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TrainFiles runs res through algo.TrainRun into a fresh directory and
// returns metrics.csv without its wall-clock columns and the saved
// model.safetensors bytes.
func TrainFiles(t *testing.T, res *algo.Resolved) (csv string, model []byte) {
	t.Helper()
	dir := t.TempDir()
	res.Header.Out = dir
	if _, err := algo.TrainRun(context.Background(), res, algo.RunOptions{}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "metrics.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if csv, err = metrics.DropWallColumns(data); err != nil {
		t.Fatal(err)
	}
	if model, err = os.ReadFile(filepath.Join(dir, algo.ModelFile)); err != nil {
		t.Fatal(err)
	}
	return csv, model
}

// Pendulum is the shared test suite of the continuous-control algorithms
// (SAC, TD3, DDPG) on Pendulum-v1, run as subtests by Run:
//
//   - smoke: a SmokeSteps-step run beats the untrained policy by 300
//     (Smoke);
//   - deterministic: same seed, same metrics.csv; another seed, another
//     (Deterministic, with Det's config);
//   - save-load: the reloaded policy acts exactly as the trained one,
//     within Pendulum's ±2 (SaveLoad);
//   - no-allocs: no allocation per step in steady state (NoAllocs);
//   - cancel: a cancelled context stops Train at once (Cancel);
//   - bad-config: Spec.Train with a nil config is ErrConfig, not a panic;
//   - configs: every configs/<name>-*.yaml resolves (ResolveConfigs).
type Pendulum struct {
	Spec algo.Spec
	// Config returns a fresh smoke configuration.
	Config func() algo.Config
	// Det returns the configuration of the determinism check; nil means
	// Config.
	Det func() algo.Config
	// SmokeSteps is the smoke run's length.
	SmokeSteps int64
	// LearningStarts sets the no-allocs run's warm-up on a Config.
	LearningStarts func(algo.Config, int)
}

// Run runs the suite.
func (p Pendulum) Run(t *testing.T) {
	const id = "Pendulum-v1"
	det := p.Det
	if det == nil {
		det = p.Config
	}
	t.Run("smoke", func(t *testing.T) {
		Smoke(t, p.Spec, algo.Header{Env: id, Seed: 1, Steps: p.SmokeSteps}, p.Config(), 300)
	})
	t.Run("deterministic", func(t *testing.T) {
		Deterministic(t, p.Spec, algo.Header{Env: id, Seed: 5, Steps: 900, LogEvery: 100}, det(), 10)
	})
	t.Run("save-load", func(t *testing.T) {
		SaveLoad(t, p.Spec, algo.Header{Env: id, Seed: 2, Steps: 700}, p.Config(), 1, 20,
			func(i int) []float32 { return []float32{float32(i%5)*0.4 - 1, float32(i%3)*0.5 - 0.5, float32(i) - 10} }, -2, 2)
	})
	t.Run("no-allocs", func(t *testing.T) {
		cfg := p.Config()
		p.LearningStarts(cfg, 100)
		NoAllocs(t, p.Spec, algo.Header{Env: id, Seed: 1, Steps: 300}, cfg)
	})
	t.Run("cancel", func(t *testing.T) {
		Cancel(t, p.Spec, algo.Header{Env: id, Seed: 1}, p.Config())
	})
	t.Run("bad-config", func(t *testing.T) {
		_, err := p.Spec.Train(context.Background(), &algo.Runtime{Header: algo.Header{Env: id}, Log: algo.Discard()}, nil)
		ConfigError(t, err, p.Spec.Name)
	})
	t.Run("configs", func(t *testing.T) {
		ResolveConfigs(t, p.Spec, "../../configs/"+p.Spec.Name+"-*.yaml")
	})
}

// Reload saves model into a fresh directory and loads it back with
// spec.LoadPolicy; it returns the policy and the checkpoint's path.
func Reload(t *testing.T, spec algo.Spec, model algo.Model, h algo.Header, cfg algo.Config) (algo.Policy, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), algo.ModelFile)
	if err := model.Save(path); err != nil {
		t.Fatal(err)
	}
	pol, err := spec.LoadPolicy(path, h, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return pol, path
}
