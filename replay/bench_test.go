package replay

import (
	"fmt"
	"testing"

	"herd/internal/rng"
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
