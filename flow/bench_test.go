package flow

import (
	"context"
	"testing"
)

// benchPar is a ParIter of n shards whose items cost nothing: what remains
// is the operators' own cost per item (actor hand-offs, channels).
func benchPar(b *testing.B, n int) ParIter[int] {
	shards := make([]Shard[int], n)
	for k := range shards {
		a := NewActor()
		b.Cleanup(a.Close)
		shards[k] = Shard[int]{Actor: a, Next: func() (int, error) { return k, nil }}
	}
	return NewParIter(context.Background(), shards)
}

// benchItems times b.N items of it.
func benchItems[T any](b *testing.B, it Iter[T]) {
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	for _, err := range it {
		if err != nil {
			b.Fatal(err)
		}
		if n++; n >= b.N {
			break
		}
	}
}

// BenchmarkGatherSync: one round of 4 shards per op (a barrier).
func BenchmarkGatherSync(b *testing.B) {
	it := GatherSync(benchPar(b, 4))
	benchItems(b, it)
}

// BenchmarkGatherAsync: one item per op from 4 shards, 2 in flight each.
func BenchmarkGatherAsync(b *testing.B) {
	it := GatherAsync(benchPar(b, 4), 2)
	benchItems(b, it)
}

// BenchmarkGatherAsyncLag: BenchmarkGatherAsync with the least lag bound
// (items in request order).
func BenchmarkGatherAsyncLag(b *testing.B) {
	it, err := GatherAsyncLag(benchPar(b, 4), 2, 0)
	if err != nil {
		b.Fatal(err)
	}
	benchItems(b, it)
}
