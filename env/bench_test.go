package env_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"herd/env"
)

// BenchmarkMakeCartPole steps CartPole-v1 as Make returns it (TimeLimit
// included): the single-env figure of `herd bench env`.
func BenchmarkMakeCartPole(b *testing.B) {
	e, _ := env.Make("CartPole-v1")
	e.Reset(1)
	acts := [2][]float32{{0}, {1}}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		_, _, term, trunc, _, err := e.Step(acts[(i*7>>2)&1])
		if err != nil {
			b.Fatal(err)
		}
		if term || trunc {
			e.Reset(env.NoSeed)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "steps/s")
}

// BenchmarkVector reports env steps/s for SyncVector and AsyncVector.
func BenchmarkVector(b *testing.B) {
	for _, mode := range []env.VectorMode{env.Sync, env.Async} {
		for _, n := range []int{16, 256} {
			b.Run(fmt.Sprintf("%v/CartPole/%d", mode, n), func(b *testing.B) {
				v, err := env.MakeVector("CartPole-v1", n, mode)
				if err != nil {
					b.Fatal(err)
				}
				defer v.Close()
				v.Reset(1)
				acts := make([]float32, n)
				for i := range acts {
					acts[i] = float32(i * 7 >> 2 & 1)
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if _, err := v.Step(acts); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "steps/s")
			})
		}
	}
}

func TestBench(t *testing.T) {
	rows, err := env.Bench(context.Background(), env.BenchConfig{IDs: []string{"CartPole-v1", "LunarLander-v3"}, NumEnvs: 3, Duration: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 6 {
		t.Fatalf("%d rows, want 6: %+v", len(rows), rows)
	}
	modes := []string{"single", "sync", "async"}
	for i, r := range rows {
		if r.Mode != modes[i%3] || r.StepsPerS <= 0 || (r.Mode == "single") != (r.NumEnvs == 1) {
			t.Fatalf("row %d: %+v", i, r)
		}
		// The default 3 repeats: the median between the min and the max.
		if r.Repeats != 3 || !(r.Min > 0 && r.Min <= r.StepsPerS && r.StepsPerS <= r.Max) {
			t.Fatalf("row %d: spread %+v, want 3 repeats with 0 < min ≤ median ≤ max", i, r)
		}
	}
	blob, _ := json.Marshal(rows[0])
	for _, key := range []string{`"env"`, `"mode"`, `"num_envs"`, `"steps_per_s"`, `"repeats"`, `"min"`, `"max"`} {
		if !strings.Contains(string(blob), key) {
			t.Fatalf("JSON row %s lacks %s", blob, key)
		}
	}
	if _, err := env.Bench(context.Background(), env.BenchConfig{IDs: []string{"Nope-v1"}}); !errors.Is(err, env.ErrUnknownID) {
		t.Fatalf("unknown id: %v", err)
	}
	if _, err := env.Bench(context.Background(), env.BenchConfig{NumEnvs: -1}); !errors.Is(err, env.ErrInvalidOption) {
		t.Fatalf("negative envs: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := env.Bench(ctx, env.BenchConfig{IDs: []string{"CartPole-v1"}, Duration: time.Hour}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
	sc, err := env.BenchScaling(context.Background(), env.BenchConfig{IDs: []string{"CartPole-v1"}, NumEnvs: 4, Duration: 2 * time.Millisecond}, 2, 1)
	if err != nil || len(sc) != 2 || sc[0].Workers != 1 || sc[1].Workers != 2 || sc[0].Speedup != 1 {
		t.Fatalf("scaling rows %+v, err %v", sc, err)
	}
}
