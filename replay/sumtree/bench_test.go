package sumtree

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"herd/internal/rng"
)

// benchTree returns a full tree of n leaves with random priorities.
func benchTree(b *testing.B, n, k int) *Tree {
	t, err := New(n, k)
	if err != nil {
		b.Fatal(err)
	}
	r := rng.New(1, "bench/fill", 0)
	idx := make([]int, n)
	p := make([]float64, n)
	for i := range idx {
		idx[i] = i
		p[i] = r.Float64() + 0.01
	}
	t.SetBatch(idx, p)
	t.Rebuild()
	return t
}

// BenchmarkSetBatch measures tree_set: B random slots set per op.
func BenchmarkSetBatch(b *testing.B) {
	for _, n := range []int{1 << 20} {
		for _, k := range []int{2, 4, 8, 16, 32, 64} {
			b.Run(fmt.Sprintf("N=%d/K=%d", n, k), func(b *testing.B) {
				t := benchTree(b, n, k)
				r := rng.New(2, "bench/set", 0)
				const batch = 128
				const rounds = 1024
				idx := make([]int, batch*rounds)
				p := make([]float64, batch*rounds)
				for i := range idx {
					idx[i] = r.IntN(n)
					p[i] = r.Float64() + 0.01
				}
				b.ReportAllocs()
				b.ResetTimer()
				setRounds(t, idx, p, batch, b.N)
			})
		}
	}
}

// BenchmarkSample measures tree_sample: B prefix-sum draws per op,
// random numbers included.
func BenchmarkSample(b *testing.B) {
	for _, n := range []int{1 << 20} {
		for _, k := range []int{2, 4, 8, 16, 32, 64} {
			b.Run(fmt.Sprintf("N=%d/K=%d", n, k), func(b *testing.B) {
				t := benchTree(b, n, k)
				r := rng.New(3, "bench/sample", 0)
				dst := make([]int, 128)
				b.ReportAllocs()
				b.ResetTimer()
				sampleRounds(t, dst, r, b.N)
			})
		}
	}
}

// setRounds and sampleRounds are the timed loops, kept out of line so that
// `valgrind --tool=callgrind --toggle-collect='*setRounds'` counts the
// operations and nothing of the setup (docs/BENCHMARKS.md, "Replay").
//
//go:noinline
func setRounds(t *Tree, idx []int, p []float64, batch, n int) {
	rounds := len(idx) / batch
	for i := 0; i < n; i++ {
		o := (i % rounds) * batch
		t.SetBatch(idx[o:o+batch], p[o:o+batch])
	}
}

//go:noinline
func sampleRounds(t *Tree, dst []int, r *rand.Rand, n int) {
	for i := 0; i < n; i++ {
		t.SampleTo(dst, r)
	}
}
