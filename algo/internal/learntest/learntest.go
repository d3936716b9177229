// Package learntest holds the test plumbing shared by herd's algorithms'
// tests: train with an in-memory or on-disk metrics.Recorder, compare
// metrics.csv files without their wall-clock columns, check determinism,
// config errors, checkpoint round trips and allocations per step, run the
// continuous-control suite (Pendulum) of SAC, TD3 and DDPG, check that an
// algorithm learns the probe envs (Probe), and run a multi-seed learning
// check from a benchmark. The checks keep the
// assertions the algorithms' tests used to copy, so each can still fail.
package learntest

import (
	"context"
	"errors"
	"fmt"
	"herd/env"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"herd/algo"
	"herd/metrics"
)

// Tee is an algo.Logger that keeps every episode return and forwards all
// calls to Next.
type Tee struct {
	Next    algo.Logger
	Returns []float64
}

func (t *Tee) Episode(step int64, ret float64, length int) {
	t.Returns = append(t.Returns, ret)
	t.Next.Episode(step, ret, length)
}
func (t *Tee) Scalar(name string, v float64) { t.Next.Scalar(name, v) }
func (t *Tee) Step(step int64)               { t.Next.Step(step) }

// LastMean is the mean return of the last k episodes (fewer if fewer ended;
// NaN if none).
func (t *Tee) LastMean(k int) float64 {
	r := t.Returns[max(0, len(t.Returns)-k):]
	var s float64
	for _, x := range r {
		s += x
	}
	return s / float64(len(r))
}

// Eval runs policy deterministically for episodes episodes of envID with
// algo.Evaluate and returns the mean return.
func Eval(tb testing.TB, policy algo.Policy, envID string, seed uint64, episodes int) float64 {
	tb.Helper()
	rets, err := algo.Evaluate(context.Background(), policy, env.Maker{}, envID, episodes, seed)
	if err != nil {
		tb.Fatal(err)
	}
	var s float64
	for _, r := range rets {
		s += r
	}
	return s / float64(len(rets))
}

// Run trains spec on h with cfg, recording into dir ("" keeps everything in
// memory), and returns the closed recorder and the model.
func Run(tb testing.TB, spec algo.Spec, h algo.Header, cfg algo.Config, dir string) (*metrics.Recorder, algo.Model) {
	rec, model, _ := RunTee(tb, spec, h, cfg, dir)
	return rec, model
}

// RunTee is Run that also returns every episode's return.
func RunTee(tb testing.TB, spec algo.Spec, h algo.Header, cfg algo.Config, dir string) (*metrics.Recorder, algo.Model, *Tee) {
	tb.Helper()
	h.Algo = spec.Name
	h.EnsureDefaults()
	rec, err := metrics.NewRecorder(metrics.Options{Dir: dir, Algo: spec.Name, Env: h.Env, Seed: h.Seed,
		TotalSteps: h.Steps, LogEvery: h.LogEvery, Scalars: spec.Scalars})
	if err != nil {
		tb.Fatal(err)
	}
	tee := &Tee{Next: rec}
	model, err := spec.Train(context.Background(), &algo.Runtime{Header: h, Log: tee}, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := rec.Close(false); err != nil {
		tb.Fatal(err)
	}
	return rec, model, tee
}

// MetricsCSV trains like Run into a fresh directory and returns metrics.csv
// without the wall-clock columns.
func MetricsCSV(tb testing.TB, spec algo.Spec, h algo.Header, cfg algo.Config) string {
	tb.Helper()
	dir := filepath.Join(tb.TempDir(), "run")
	Run(tb, spec, h, cfg, dir)
	data, err := os.ReadFile(filepath.Join(dir, "metrics.csv"))
	if err != nil {
		tb.Fatal(err)
	}
	return StripWall(string(data))
}

// StripWall removes the columns of a metrics.csv that depend on the clock
// (metrics.WallColumns).
func StripWall(csv string) string {
	lines := strings.Split(strings.TrimSpace(csv), "\n")
	drop := map[int]bool{}
	for i, name := range strings.Split(lines[0], ",") {
		if slices.Contains(metrics.WallColumns(), name) {
			drop[i] = true
		}
	}
	out := make([]string, 0, len(lines))
	for _, l := range lines {
		var keep []string
		for i, f := range strings.Split(l, ",") {
			if !drop[i] {
				keep = append(keep, f)
			}
		}
		out = append(out, strings.Join(keep, ","))
	}
	return strings.Join(out, "\n")
}

// Seeds is a learning check for tuning, run from a benchmark: it trains
// seeds 1…HERD_SEEDS (default 5) for HERD_STEPS steps (default steps) on
// envID, applying the ";"-separated key=value overrides in HERD_SET to
// cfg(), writing runs under HERD_BENCH_OUT when set, and logs each seed's
// final mean return (last 100 episodes) and wall time.
func Seeds(b *testing.B, spec algo.Spec, envID string, steps int64, cfg func() algo.Config) {
	nSeeds := uint64(5)
	if v := os.Getenv("HERD_SEEDS"); v != "" {
		fmt.Sscan(v, &nSeeds)
	}
	if v := os.Getenv("HERD_STEPS"); v != "" {
		fmt.Sscan(v, &steps)
	}
	out := os.Getenv("HERD_BENCH_OUT")
	for b.Loop() {
		for seed := uint64(1); seed <= nSeeds; seed++ {
			c := cfg()
			if v := os.Getenv("HERD_SET"); v != "" {
				for _, kv := range strings.Split(v, ";") {
					if err := algo.Set(c, kv); err != nil {
						b.Fatal(err)
					}
				}
			}
			dir := ""
			if out != "" {
				dir = filepath.Join(out, fmt.Sprint(seed))
			}
			start := time.Now()
			rec, model, tee := RunTee(b, spec, algo.Header{Env: envID, Seed: seed, Steps: steps}, c, dir)
			wall := time.Since(start).Seconds()
			mean, _, _ := rec.ReturnStats()
			b.Logf("%s %s seed %d: return_mean_100 %.1f, last10 %.1f, eval100 %.1f (%d episodes), %.1f s, %.0f steps/s",
				spec.Name, envID, seed, mean, tee.LastMean(10), Eval(b, model, envID, 1000+seed, 100),
				len(tee.Returns), wall, float64(steps)/wall)
		}
	}
}

// Smoke is the shared smoke test of the continuous-control algorithms: it
// evaluates the untrained policy (Steps = 0 trains nothing), trains for
// h.Steps, and requires the deterministic return on Pendulum-style tasks
// to improve by at least margin. It returns both evaluations.
func Smoke(t *testing.T, spec algo.Spec, h algo.Header, cfg algo.Config, margin float64) (before, after float64) {
	t.Helper()
	steps := h.Steps
	h.Steps = 1
	_, untrained := Run(t, spec, h, cfg, "")
	before = Eval(t, untrained, h.Env, 99, 5)
	h.Steps = steps
	_, model := Run(t, spec, h, cfg, "")
	after = Eval(t, model, h.Env, 99, 5)
	t.Logf("%s on %s: deterministic return %.1f untrained, %.1f after %d steps", spec.Name, h.Env, before, after, steps)
	if !(after >= before+margin) {
		t.Errorf("%s did not learn: return %.1f after %d steps, %.1f untrained; want an improvement ≥ %.0f",
			spec.Name, after, steps, before, margin)
	}
	return before, after
}

// AllocsPerStep trains twice, for steps and for 2·steps, with a Discard
// logger and returns the extra allocations per extra step: zero when the
// training loop allocates nothing in steady state (setup costs cancel). It
// skips the test under -race.
func AllocsPerStep(tb testing.TB, spec algo.Spec, h algo.Header, cfg algo.Config) float64 {
	tb.Helper()
	if RaceEnabled {
		tb.Skip("allocation counts are meaningless under -race (sync.Pool drops items)")
	}
	h.Algo = spec.Name
	h.EnsureDefaults()
	count := func(steps int64) float64 {
		hh := h
		hh.Steps = steps
		return testing.AllocsPerRun(1, func() {
			if _, err := spec.Train(context.Background(), &algo.Runtime{Header: hh, Log: algo.Discard()}, cfg); err != nil {
				tb.Fatal(err)
			}
		})
	}
	// testing.AllocsPerRun counts the whole process's allocations, so a
	// runtime or test goroutine can add a few to one measurement, never
	// take any away: the least of three is the loop's own.
	least := math.Inf(1)
	for range 3 {
		a, b := count(h.Steps), count(2*h.Steps)
		if least = min(least, (b-a)/float64(h.Steps)); least <= 0 {
			break
		}
	}
	return least
}

// Cancel checks that Train on a cancelled context returns at once with a
// model and an error wrapping context.Canceled (algo.Spec's contract).
func Cancel(t *testing.T, spec algo.Spec, h algo.Header, cfg algo.Config) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	h.Algo = spec.Name
	h.Steps = 1 << 40
	h.EnsureDefaults()
	start := time.Now()
	model, err := spec.Train(ctx, &algo.Runtime{Header: h, Log: algo.Discard()}, cfg)
	if !errors.Is(err, context.Canceled) || model == nil {
		t.Fatalf("Train on a cancelled context = %v, %v; want a model and context.Canceled", model, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("cancellation took %v", d)
	}
}

// ResolveConfigs checks that every file matching pattern (e.g.
// "../../configs/dqn-*.yaml") resolves strictly against spec: no unknown
// key, every value valid. It fails if nothing matches.
func ResolveConfigs(t *testing.T, spec algo.Spec, pattern string) {
	t.Helper()
	files, err := filepath.Glob(pattern)
	if err != nil || len(files) == 0 {
		t.Fatalf("no config matches %s (%v)", pattern, err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		res, err := algo.Resolve(data, []algo.Spec{spec}, algo.Overrides{})
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if res.Spec.Name != spec.Name {
			t.Errorf("%s: algo %s, want %s", f, res.Spec.Name, spec.Name)
		}
	}
}
