package sumtree

import (
	"sync"
	"testing"

	"herd/internal/rng"
)

// TestSharedMatchesPlain: on a quiescent tree the shared-mode operations
// give what the plain ones give. Priorities are small integers, so sums
// are exact whatever the order of the adds and every search must land on
// the same leaf.
func TestSharedMatchesPlain(t *testing.T) {
	for _, k := range fanouts {
		for _, n := range []int{1, 7, 1000, 4097} {
			plain, _ := New(n, k)
			shared, _ := New(n, k)
			r := rng.New(1, "sumtree/shared", k*10000+n)
			for round := 0; round < 20; round++ {
				m := 1 + r.IntN(300)
				idx := make([]int, m)
				p := make([]float64, m)
				for b := range idx {
					idx[b] = r.IntN(n)
					if round%2 == 0 && b > 0 {
						idx[b] = (idx[b-1] + 1) % n // runs of adjacent leaves too
					}
					p[b] = float64(r.IntN(5))
				}
				plain.SetBatch(idx, p)
				// Shared mode writes leaf by leaf (the caller's lock
				// makes duplicates sequential), then propagates.
				d := make([]float64, m)
				for b, i := range idx {
					d[b] = shared.SetLeaf(i, p[b])
				}
				shared.PropagateShared(idx, d)
				if plain.Total() != shared.LoadTotal() {
					t.Fatalf("k=%d n=%d: total %v plain, %v shared", k, n, plain.Total(), shared.LoadTotal())
				}
				if err := shared.Verify(0); err != nil {
					t.Fatalf("k=%d n=%d: %v", k, n, err)
				}
				if !(plain.Total() > 0) {
					continue
				}
				u := make([]float64, 64)
				for b := range u {
					u[b] = r.Float64() * plain.Total()
				}
				want := plain.FindTo(make([]int, len(u)), u)
				us := append([]float64(nil), u...)
				groups := shared.DescendInnerShared(nil, us)
				for b, g := range groups {
					if got := shared.LeafInGroup(g, us[b]); got != want[b] {
						t.Fatalf("k=%d n=%d: target %v found leaf %d, plain %d", k, n, u[b], got, want[b])
					}
				}
			}
			shared.RebuildShared()
			if err := shared.Verify(0); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestSharedConcurrent: four writers (each owning a quarter of the leaves,
// as a caller's per-group locks would) set and propagate while two readers
// search; afterwards every inner node is the sum of its children and the
// root the sum of the leaves. Searches meanwhile land on a real leaf or
// report none, never anything else. Run it with -race.
func TestSharedConcurrent(t *testing.T) {
	const n, k, writers = 1 << 14, 8, 4
	tr, _ := New(n, k)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rng.New(2, "sumtree/shared-w", w)
			lo, span := w*n/writers, n/writers
			idx, d := make([]int, 32), make([]float64, 32)
			for range 3000 {
				start := lo + r.IntN(span-32)
				for b := range idx {
					if w%2 == 0 {
						idx[b] = start + b // adjacent, like an actor
					} else {
						idx[b] = lo + r.IntN(span) // random, like a learner
					}
				}
				for b, i := range idx {
					// A duplicate index gets a delta relative to the
					// earlier write, so the deltas still add up.
					d[b] = tr.SetLeaf(i, float64(r.IntN(4)))
				}
				tr.PropagateShared(idx, d)
			}
		}()
	}
	var readers sync.WaitGroup
	for g := range 2 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			r := rng.New(3, "sumtree/shared-r", g)
			u := make([]float64, 16)
			for {
				select {
				case <-stop:
					return
				default:
				}
				total := tr.LoadTotal()
				for b := range u {
					u[b] = r.Float64() * total
				}
				for _, grp := range tr.DescendInnerShared(nil, u) {
					if grp < 0 || grp<<tr.shift >= len(tr.lv) {
						t.Errorf("group %d out of range", grp)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	readers.Wait()
	if err := tr.Verify(1e-12); err != nil {
		t.Fatal(err)
	}
	var s float64
	for i := range n {
		s += tr.Get(i)
	}
	if s != tr.LoadTotal() {
		t.Fatalf("root %v, leaves sum to %v", tr.LoadTotal(), s)
	}
}
