package minatar

import (
	"math/rand/v2"
	"testing"

	"herd/env/internal/core"
)

// BenchmarkStep times one Step of each game (full action set, MinAtar's
// defaults) under uniformly random actions, resetting with NoSeed when an
// episode ends, as a training loop does; the observation is written on
// every step. Compare with MinAtar's own step: testdata/gen/bench_minatar.py.
func BenchmarkStep(b *testing.B) {
	for _, game := range Games() {
		b.Run(game, func(b *testing.B) {
			e, err := New(DefaultConfig(game))
			if err != nil {
				b.Fatal(err)
			}
			if _, _, err := e.Reset(1); err != nil {
				b.Fatal(err)
			}
			r := rand.New(rand.NewPCG(1, 2))
			acts := make([][]float32, 4096)
			for i := range acts {
				acts[i] = []float32{float32(r.IntN(numActions))}
			}
			episodes := 0
			b.ReportAllocs()
			stop := reportCPU(b)
			i := 0
			for b.Loop() {
				_, _, term, _, _, err := e.Step(acts[i&4095])
				if err != nil {
					b.Fatal(err)
				}
				if term {
					episodes++
					if _, _, err := e.Reset(core.NoSeed); err != nil {
						b.Fatal(err)
					}
				}
				i++
			}
			stop()
			b.ReportMetric(float64(i)/float64(max(episodes, 1)), "steps/episode")
		})
	}
}
