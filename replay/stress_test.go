package replay

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"herd/internal/rng"
)

// TestConcurrentStress runs 8 goroutines (3 inserting batches, 3 sampling
// and updating, 2 doing both) against one buffer for 2 s (0.5 s for the
// GlobalLock baseline) and checks, on every sampled row, that its fields
// agree (no torn read), that slot and generation are consistent, and that
// weights and probabilities are in range; at the end, the tree's inner
// nodes match their leaves and every positive priority belongs to the
// generation its slot holds. Run it with -race.
func TestConcurrentStress(t *testing.T) {
	for _, tc := range []struct {
		lock Locking
		dur  time.Duration
	}{{TwoLock, 2 * time.Second}, {GlobalLock, 500 * time.Millisecond}} {
		t.Run(tc.lock.String(), func(t *testing.T) {
			const capacity, obs, act = 4096, 4, 2
			p := mustPrioritized(t, Config{Capacity: capacity, ObsSize: obs, ActSize: act, Fanout: 8,
				Locking: tc.lock, Stratified: true, RebuildEvery: 5000})
			var ids atomic.Int64
			if err := p.Add(makeBatch(256, obs, act, int(ids.Add(256)-256))); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), tc.dur)
			defer cancel()
			var wg sync.WaitGroup
			var samples, updates, inserts atomic.Int64
			errc := make(chan error, 8)
			fail := func(format string, a ...any) {
				select {
				case errc <- errorf(format, a...):
				default:
				}
				cancel()
			}
			insert := func(r interface{ IntN(int) int }) {
				n := 1 + r.IntN(48)
				first := int(ids.Add(int64(n))) - n
				if err := p.Add(makeBatch(n, obs, act, first)); err != nil {
					fail("add: %v", err)
				}
				inserts.Add(int64(n))
			}
			learn := func(s *Sample, r interface {
				IntN(int) int
				Float64() float64
			}, sr *rngT) {
				if err := p.Sample(s, 128, sr); err != nil {
					fail("sample: %v", err)
					return
				}
				pr := make([]float64, s.Len())
				for i := range s.Index {
					id := checkRow(s, i, obs, act)
					if id < 0 {
						fail("torn read in slot %d", s.Index[i])
						return
					}
					if s.Index[i] < 0 || s.Index[i] >= capacity || s.Gen[i] == 0 {
						fail("slot %d gen %d", s.Index[i], s.Gen[i])
						return
					}
					if !(s.Weight[i] > 0 && s.Weight[i] <= 1) || !(s.Prob[i] > 0 && s.Prob[i] <= 1) {
						fail("weight %v prob %v", s.Weight[i], s.Prob[i])
						return
					}
					pr[i] = r.Float64() * 2
				}
				if _, err := p.UpdatePriorities(s.Index, s.Gen, pr); err != nil {
					fail("update: %v", err)
				}
				samples.Add(int64(s.Len()))
				updates.Add(1)
			}
			for g := 0; g < 8; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := rng.New(99, "replay/test/stress", g)
					var s Sample
					for ctx.Err() == nil {
						switch {
						case g < 3:
							insert(r)
						case g < 6:
							learn(&s, r, r)
						default:
							if r.IntN(2) == 0 {
								insert(r)
							} else {
								learn(&s, r, r)
							}
						}
					}
				}()
			}
			wg.Wait()
			select {
			case err := <-errc:
				t.Fatal(err)
			default:
			}
			if err := p.Verify(1e-9); err != nil {
				t.Fatal(err)
			}
			if inserts.Load() < capacity || updates.Load() < 10 {
				t.Errorf("too little work to mean anything: %d inserts, %d updates", inserts.Load(), updates.Load())
			}
			t.Logf("%s: %d inserts, %d sampled, %d updates", tc.lock, inserts.Load(), samples.Load(), updates.Load())
		})
	}
}

// TestUniformConcurrent: 2 inserters and 2 samplers for 300 ms on a small
// ring (so slots are overwritten while being read); no torn rows, and
// every row's slot and generation match its id.
func TestUniformConcurrent(t *testing.T) {
	const capacity = 512
	u, err := NewUniform(Config{Capacity: capacity, ObsSize: 3, ActSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	var ids atomic.Int64
	_ = u.Add(makeBatch(64, 3, 2, int(ids.Add(64)-64)))
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	var wg sync.WaitGroup
	var bad atomic.Int64
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rng.New(5, "replay/test/uniform-stress", g)
			var s Sample
			for ctx.Err() == nil {
				if g < 2 {
					n := 1 + r.IntN(40)
					// Ids are reserved in the same order as slots only
					// per batch, so check consistency within a row.
					_ = u.Add(makeBatch(n, 3, 2, int(ids.Add(int64(n)))-n))
					continue
				}
				if err := u.Sample(&s, 64, r); err != nil {
					bad.Add(1)
					continue
				}
				for i := range s.Index {
					if checkRow(&s, i, 3, 2) < 0 || s.Gen[i] == 0 {
						bad.Add(1)
					}
				}
			}
		}()
	}
	wg.Wait()
	if bad.Load() != 0 {
		t.Fatalf("%d torn rows or failed samples", bad.Load())
	}
}

// TestPriorityMatchesData: while actors overwrite a small ring, every
// sampled row's probability must come from the priority set for the data
// returned, never from the evicted transition's (Add writes a slot's data
// and priority in one stripe critical section; Sample must never read them
// apart).
// Each transition's priority is a function of its id, so within one batch
// Prob[i]/Prob[0] must equal prio(id_i)/prio(id_0).
func TestPriorityMatchesData(t *testing.T) {
	for _, lock := range []Locking{TwoLock, GlobalLock} {
		t.Run(lock.String(), func(t *testing.T) {
			const capacity, obs, act = 512, 3, 2
			p := mustPrioritized(t, Config{Capacity: capacity, ObsSize: obs, ActSize: act, Fanout: 4, Alpha: 1, Locking: lock})
			prio := func(id int) float64 { return float64(1 + id%7) }
			var ids atomic.Int64
			add := func(n int) error {
				first := int(ids.Add(int64(n))) - n
				pr := make([]float64, n)
				for k := range pr {
					pr[k] = prio(first + k)
				}
				return p.AddWithPriorities(makeBatch(n, obs, act, first), pr)
			}
			if err := add(capacity); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			var wg sync.WaitGroup
			var bad, rows atomic.Int64
			for g := 0; g < 4; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := rng.New(7, "replay/test/pairing", g)
					var s Sample
					for ctx.Err() == nil {
						if g < 2 {
							if err := add(1 + r.IntN(32)); err != nil {
								bad.Add(1)
							}
							continue
						}
						if err := p.Sample(&s, 64, r); err != nil {
							bad.Add(1)
							continue
						}
						id0 := checkRow(&s, 0, obs, act)
						for i := range s.Index {
							id := checkRow(&s, i, obs, act)
							if id < 0 || id0 < 0 || !near(s.Prob[i]/s.Prob[0], prio(id)/prio(id0), 1e-9) {
								bad.Add(1)
							}
						}
						rows.Add(int64(s.Len()))
					}
				}()
			}
			wg.Wait()
			if bad.Load() != 0 {
				t.Fatalf("%d of %d rows with a priority that is not their data's", bad.Load(), rows.Load())
			}
			if rows.Load() < 10*64 {
				t.Fatalf("only %d rows sampled", rows.Load())
			}
		})
	}
}
