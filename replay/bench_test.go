package replay

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"herd/internal/rng"
	"herd/sample"
)

func benchBuffer(b *testing.B, n int, lock Locking) *Prioritized {
	p := mustPrioritized(b, Config{Capacity: n, ObsSize: 4, Locking: lock})
	for id := 0; id < n; id += 1024 {
		if err := p.Add(makeBatch(min(1024, n-id), 4, 1, id)); err != nil {
			b.Fatal(err)
		}
	}
	return p
}

// BenchmarkPrioritized measures one batch of 128 CartPole transitions per
// op: Add, Sample, UpdatePriorities, one goroutine.
func BenchmarkPrioritized(b *testing.B) {
	for _, lock := range []Locking{TwoLock, GlobalLock} {
		p := benchBuffer(b, 1<<20, lock)
		r := rng.New(1, "bench", 0)
		batch := makeBatch(128, 4, 1, 0)
		var s Sample
		pr := make([]float64, 128)
		for i := range pr {
			pr[i] = r.Float64() + 0.01
		}
		_ = p.Sample(&s, 128, r)
		b.Run(fmt.Sprintf("%s/insert", lock), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				_ = p.Add(batch)
			}
		})
		b.Run(fmt.Sprintf("%s/sample", lock), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				_ = p.Sample(&s, 128, r)
			}
		})
		b.Run(fmt.Sprintf("%s/update", lock), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				_, _ = p.UpdatePriorities(s.Index, s.Gen, pr)
			}
		})
	}
}

// BenchmarkUniformSample: one batch of 128 per op.
func BenchmarkUniformSample(b *testing.B) {
	u, _ := NewUniform(Config{Capacity: 1 << 20, ObsSize: 4})
	for id := 0; id < 1<<20; id += 1024 {
		_ = u.Add(makeBatch(1024, 4, 1, id))
	}
	r := rng.New(1, "bench", 0)
	var s Sample
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		_ = u.Sample(&s, 128, r)
	}
}

// BenchmarkSampleMinAtar: one batch of 32 per op from a full uniform
// buffer of 100,000 MinAtar Breakout transitions (two 10×10×4 binary
// planes each), as DQN's config samples it, with observations stored as
// float32 and bit-packed.
func BenchmarkSampleMinAtar(b *testing.B) {
	const capacity, obsSize = 100_000, 400
	data := rand.New(rand.NewPCG(1, 1))
	batch := planeBatch(data, 1000, obsSize, 0, 1, func(r *rand.Rand) float32 {
		return float32(1 - min(1, r.IntN(8))) // sparse, as the planes are
	})
	for _, enc := range []sample.ObsEncoding{sample.ObsFloat32, sample.ObsBits} {
		u, err := NewUniform(Config{Capacity: capacity, ObsSize: obsSize, ObsEncoding: enc, Locking: GlobalLock})
		if err != nil {
			b.Fatal(err)
		}
		for range capacity / 1000 {
			if err := u.Add(batch); err != nil {
				b.Fatal(err)
			}
		}
		name := map[sample.ObsEncoding]string{sample.ObsFloat32: "float32", sample.ObsBits: "bits"}[enc]
		b.Run(name, func(b *testing.B) {
			r := rng.New(1, "bench", 0)
			var s Sample
			if err := u.Sample(&s, 32, r); err != nil { // sizes s
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := u.Sample(&s, 32, r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
