package env

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"time"

	"herd/internal/rng"
)

// BenchConfig configures Bench (the logic behind `herd bench env`).
type BenchConfig struct {
	// IDs to measure; empty means all registered ids.
	IDs []string
	// NumEnvs for the vector rows; 0 means 16.
	NumEnvs int
	// Workers for AsyncVector; 0 means GOMAXPROCS.
	Workers int
	// Duration of each measurement; 0 means 1 s.
	Duration time.Duration
	// Seed for envs and the random actions.
	Seed uint64
	// Repeats of each measurement, interleaved over the modes so that load
	// from other processes hits every mode alike; 0 means 3.
	Repeats int
}

// BenchRow is one cell: env steps per second (summed over the vector's
// envs) for one env id and mode ("single", "sync", "async"), the median of
// Repeats measurements with their min and max, so that noise is visible.
type BenchRow struct {
	Env       string  `json:"env"`
	Mode      string  `json:"mode"`
	NumEnvs   int     `json:"num_envs"`
	Repeats   int     `json:"repeats"`
	Min       float64 `json:"min"`
	StepsPerS float64 `json:"steps_per_s"`
	Max       float64 `json:"max"`
}

// Bench measures, for each id, a single env from Make (TimeLimit included),
// a SyncVector and an AsyncVector of NumEnvs envs, stepping random actions
// drawn in advance (so the policy costs nothing) and resetting as episodes
// end. It stops early with ctx's error.
func Bench(ctx context.Context, cfg BenchConfig) ([]BenchRow, error) {
	if cfg.NumEnvs < 0 || cfg.Workers < 0 || cfg.Duration < 0 || cfg.Repeats < 0 {
		return nil, fmt.Errorf("%w: bench num envs %d, workers %d, duration %v, repeats %d; want ≥ 0",
			ErrInvalidOption, cfg.NumEnvs, cfg.Workers, cfg.Duration, cfg.Repeats)
	}
	if cfg.Repeats == 0 {
		cfg.Repeats = 3
	}
	if cfg.NumEnvs == 0 {
		cfg.NumEnvs = 16
	}
	if cfg.Duration == 0 {
		cfg.Duration = time.Second
	}
	ids := cfg.IDs
	if len(ids) == 0 {
		ids = IDs()
	}
	for _, id := range ids {
		if _, err := SpecOf(id); err != nil {
			return nil, err
		}
	}
	var rows []BenchRow
	for _, id := range ids {
		cells := []BenchRow{
			{Env: id, Mode: "single", NumEnvs: 1},
			{Env: id, Mode: Sync.String(), NumEnvs: cfg.NumEnvs},
			{Env: id, Mode: Async.String(), NumEnvs: cfg.NumEnvs},
		}
		runs := make([][]float64, len(cells))
		for range cfg.Repeats {
			for i, c := range cells {
				var sps float64
				var err error
				switch c.Mode {
				case "single":
					sps, err = benchSingle(ctx, id, cfg)
				case Sync.String():
					sps, err = benchVector(ctx, id, Sync, cfg)
				default:
					sps, err = benchVector(ctx, id, Async, cfg)
				}
				if err != nil {
					return rows, err
				}
				runs[i] = append(runs[i], sps)
			}
		}
		for i, c := range cells {
			slices.Sort(runs[i])
			c.Repeats, c.Min, c.Max = len(runs[i]), runs[i][0], runs[i][len(runs[i])-1]
			c.StepsPerS = median(runs[i])
			rows = append(rows, c)
		}
	}
	return rows, nil
}

// randomActions draws n actions of space s (flat, n·Dim values).
func randomActions(s Space, n int, seed uint64, slot int) []float32 {
	r := rng.New(seed, "bench/env/actions", slot)
	d := s.Dim()
	out := make([]float32, n*d)
	for i := 0; i < n; i++ {
		s.SampleTo(out[i*d:(i+1)*d], r)
	}
	return out
}

// timed calls step in chunks until d has passed, and returns calls per
// second. Chunks start at one call and double up to maxChunk, so slow envs
// stop close to d and fast ones read the clock rarely.
func timed(ctx context.Context, d time.Duration, maxChunk int, step func(i int) error) (float64, error) {
	start := time.Now()
	n, chunk := 0, 1
	for {
		for j := 0; j < chunk; j++ {
			if err := step(n); err != nil {
				return 0, err
			}
			n++
		}
		if el := time.Since(start); el >= d {
			return float64(n) / el.Seconds(), nil
		}
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		chunk = min(2*chunk, maxChunk)
	}
}

func benchSingle(ctx context.Context, id string, cfg BenchConfig) (float64, error) {
	e, err := Make(id)
	if err != nil {
		return 0, err
	}
	defer e.Close()
	const na = 4096
	acts := randomActions(e.ActionSpace(), na, cfg.Seed, 0)
	d := e.ActionSpace().Dim()
	if _, _, err := e.Reset(int64(cfg.Seed >> 1)); err != nil {
		return 0, err
	}
	return timed(ctx, cfg.Duration, 1024, func(i int) error {
		k := i % na
		_, _, term, trunc, _, err := e.Step(acts[k*d : (k+1)*d])
		if err != nil {
			return err
		}
		if term || trunc {
			_, _, err = e.Reset(NoSeed)
		}
		return err
	})
}

func benchVector(ctx context.Context, id string, mode VectorMode, cfg BenchConfig) (float64, error) {
	factory := func(int) (Env, error) { return Make(id) }
	var v Vector
	var err error
	if mode == Async {
		v, err = NewAsyncVector(cfg.NumEnvs, factory, AsyncOptions{Workers: cfg.Workers})
	} else {
		v, err = NewSyncVector(cfg.NumEnvs, factory)
	}
	if err != nil {
		return 0, err
	}
	defer v.Close()
	const batches = 64
	acts := randomActions(v.ActionSpace(), batches*cfg.NumEnvs, cfg.Seed, 1)
	w := cfg.NumEnvs * v.ActionSpace().Dim()
	if _, err := v.Reset(int64(cfg.Seed >> 1)); err != nil {
		return 0, err
	}
	chunk := max(1, 16384/cfg.NumEnvs)
	perS, err := timed(ctx, cfg.Duration, chunk, func(i int) error {
		k := i % batches
		_, err := v.Step(acts[k*w : (k+1)*w])
		return err
	})
	return perS * float64(cfg.NumEnvs), err
}

// ScalingRow is one AsyncVector measurement of BenchScaling.
type ScalingRow struct {
	Env       string  `json:"env"`
	Mode      string  `json:"mode"`
	NumEnvs   int     `json:"num_envs"`
	Workers   int     `json:"workers"`
	StepsPerS float64 `json:"steps_per_s"`
	// Speedup is StepsPerS over the 1-worker figure of the same run.
	Speedup float64 `json:"speedup"`
}

// BenchScaling measures AsyncVector with 1, 2, 4, … up to maxWorkers
// workers (default GOMAXPROCS), interleaving short runs over several rounds
// and keeping each count's median, so that load from other processes hits
// every count alike; the speedups are ratios within one run.
func BenchScaling(ctx context.Context, cfg BenchConfig, maxWorkers, rounds int) ([]ScalingRow, error) {
	if maxWorkers <= 0 {
		maxWorkers = runtime.GOMAXPROCS(0)
	}
	if rounds <= 0 {
		rounds = 5
	}
	if cfg.NumEnvs <= 0 {
		cfg.NumEnvs = 16
	}
	if cfg.Duration <= 0 {
		cfg.Duration = 200 * time.Millisecond
	}
	ids := cfg.IDs
	if len(ids) == 0 {
		ids = []string{"CartPole-v1", "LunarLander-v3"}
	}
	var counts []int
	for w := 1; w < maxWorkers; w *= 2 {
		counts = append(counts, w)
	}
	counts = append(counts, maxWorkers)
	var rows []ScalingRow
	for _, id := range ids {
		if _, err := SpecOf(id); err != nil {
			return nil, err
		}
		samples := make([][]float64, len(counts))
		for r := 0; r < rounds; r++ {
			for k, w := range counts {
				c := cfg
				c.Workers = w
				sps, err := benchVector(ctx, id, Async, c)
				if err != nil {
					return rows, err
				}
				samples[k] = append(samples[k], sps)
			}
		}
		base := median(samples[0])
		for k, w := range counts {
			m := median(samples[k])
			rows = append(rows, ScalingRow{Env: id, Mode: "async", NumEnvs: cfg.NumEnvs, Workers: w, StepsPerS: m, Speedup: m / base})
		}
	}
	return rows, nil
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	slices.Sort(s)
	return s[len(s)/2]
}
