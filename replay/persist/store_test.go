package persist

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"herd/internal/rng"
)

var ctx = context.Background()

// openTest opens a store on an in-memory filesystem and closes it at the
// end of the test.
func openTest(t testing.TB, o Options) *Store {
	t.Helper()
	if o.Mode != Memory && o.Dir == "" {
		o.Dir = "/store"
	}
	if o.FS == nil && o.Mode != Memory {
		o.FS = vfs.NewMem()
	}
	s, err := Open(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return s
}

func val(key string, n int) []byte {
	b := make([]byte, n)
	r := rng.New(uint64(len(key)), "persist/test/value:"+key, 0)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

var modes = []Mode{Memory, Disk, Hybrid}

func TestPushGetDeleteAllModes(t *testing.T) {
	for _, m := range modes {
		t.Run(m.String(), func(t *testing.T) {
			s := openTest(t, Options{Mode: m, CacheMB: 1})
			for i := 0; i < 200; i++ {
				k := fmt.Sprintf("k%03d", i)
				if err := s.Push(ctx, k, Record{Value: val(k, 10000), Fields: map[string]float64{"i": float64(i)}}); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 200; i++ {
				k := fmt.Sprintf("k%03d", i)
				r, err := s.GetRecord(k)
				if err != nil {
					t.Fatalf("get %s: %v", k, err)
				}
				if !bytes.Equal(r.Value, val(k, 10000)) || r.Fields["i"] != float64(i) {
					t.Fatalf("get %s: wrong record (fields %v)", k, r.Fields)
				}
			}
			if err := s.Delete(ctx, "k007"); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Get("k007"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("get after delete: %v", err)
			}
			if err := s.Delete(ctx, "k007"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("second delete: %v", err)
			}
			if s.Len() != 199 {
				t.Fatalf("Len %d", s.Len())
			}
			if err := s.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Get("k007"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("get after applied delete: %v", err)
			}
			if m == Hybrid {
				st := s.Stats()
				if st.Evictions == 0 || st.MaxCacheBytes > st.CacheLimit {
					t.Fatalf("hybrid stats %+v: want evictions and cache within limit", st)
				}
			}
		})
	}
}

func TestBadInput(t *testing.T) {
	s := openTest(t, Options{Mode: Hybrid, MaxValueBytes: 100,
		Samplers: []Sampler{NewPrioritized("per", "priority", 0.6)}})
	if err := s.Push(ctx, "", Record{}); !errors.Is(err, ErrEmptyKey) {
		t.Errorf("empty key: %v", err)
	}
	if err := s.Push(ctx, "a", Record{Value: make([]byte, 101), Fields: map[string]float64{"priority": 1}}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("too large: %v", err)
	}
	if err := s.Push(ctx, "a", Record{Value: []byte("x")}); err == nil {
		t.Errorf("missing priority accepted")
	}
	if err := s.Push(ctx, "a", Record{Value: []byte("x"), Fields: map[string]float64{"priority": -1}}); err == nil {
		t.Errorf("negative priority accepted")
	}
	// 1e70^0.6 = 1e42 is past the sum tree's float32 leaves.
	if err := s.Push(ctx, "a", Record{Value: []byte("x"), Fields: map[string]float64{"priority": 1e70}}); err == nil {
		t.Errorf("priority past the sum tree's range accepted")
	}
	if _, err := s.Get(""); !errors.Is(err, ErrEmptyKey) {
		t.Errorf("get empty key: %v", err)
	}
	if _, err := s.Sample(nil, 4, "nope"); !errors.Is(err, ErrUnknownSampler) {
		t.Errorf("unknown sampler: %v", err)
	}
	if _, err := s.Snapshot(ctx); !errors.Is(err, ErrNoSnapshotURL) {
		t.Errorf("snapshot without url: %v", err)
	}
	if _, err := Open(ctx, Options{Mode: Disk, P0Prob: 2, CacheMB: -1}); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("bad options: %v", err)
	} else if n := bytes.Count([]byte(err.Error()), []byte("invalid options")); n != 3 {
		t.Errorf("want every problem reported (3), got %d: %v", n, err)
	}
	if _, err := ParseMode("ram"); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("bad mode: %v", err)
	}
	s.Close()
	if err := s.Push(ctx, "a", Record{Fields: map[string]float64{"priority": 1}}); !errors.Is(err, ErrClosed) {
		t.Errorf("push after close: %v", err)
	}
	if _, err := s.Get("a"); !errors.Is(err, ErrClosed) {
		t.Errorf("get after close: %v", err)
	}
}

// TestReadYourWritesConcurrent runs writers that each push, overwrite and
// delete their own keys and read every write back at once, while a small
// cache forces evictions and populates underneath them.
func TestReadYourWritesConcurrent(t *testing.T) {
	for _, m := range modes {
		t.Run(m.String(), func(t *testing.T) {
			s := openTest(t, Options{Mode: m, CacheMB: 1, QueueP0: 64, Seed: 3})
			const writers, ops = 4, 300
			var wg sync.WaitGroup
			errc := make(chan error, writers)
			for w := 0; w < writers; w++ {
				wg.Add(1)
				go func(w int) {
					defer wg.Done()
					r := rng.New(7, "persist/test/ryw", w)
					var items []Item
					for i := 0; i < ops; i++ {
						k := fmt.Sprintf("w%d/k%d", w, r.IntN(40))
						v := val(fmt.Sprintf("%s#%d", k, i), 1000+r.IntN(20000))
						if r.IntN(5) == 0 {
							err := s.Delete(ctx, k)
							if err != nil && !errors.Is(err, ErrNotFound) {
								errc <- err
								return
							}
							if _, err := s.Get(k); !errors.Is(err, ErrNotFound) {
								errc <- fmt.Errorf("%s: read after own delete: %v", k, err)
								return
							}
							continue
						}
						if err := s.Push(ctx, k, Record{Value: v}); err != nil {
							errc <- err
							return
						}
						got, err := s.Get(k)
						if err != nil || !bytes.Equal(got, v) {
							errc <- fmt.Errorf("%s: read after own push: err %v, equal %v", k, err, bytes.Equal(got, v))
							return
						}
						items, err = s.Sample(items, 8, "uniform")
						if err != nil {
							errc <- err
							return
						}
						if i%50 == 0 {
							// Sample must see this writer's newest write among the candidates.
							found := false
							for j := 0; j < 200 && !found; j++ {
								items, _ = s.Sample(items, 64, "uniform")
								for _, it := range items {
									if it.Key == k {
										found = bytes.Equal(it.Value, v)
									}
								}
							}
							if !found {
								errc <- fmt.Errorf("%s: own push never sampled with its value", k)
								return
							}
						}
					}
				}(w)
			}
			wg.Wait()
			close(errc)
			for err := range errc {
				t.Fatal(err)
			}
			if st := s.Stats(); st.CacheLimit > 0 && st.MaxCacheBytes > st.CacheLimit {
				t.Fatalf("cache peaked at %d > limit %d", st.MaxCacheBytes, st.CacheLimit)
			}
		})
	}
}

// TestCacheWithinLimit measures the cache's high-water mark while values of
// mixed sizes stream through a 1 MiB cache.
func TestCacheWithinLimit(t *testing.T) {
	s := openTest(t, Options{Mode: Hybrid, CacheMB: 1})
	r := rng.New(1, "persist/test/limit", 0)
	total := 0
	for i := 0; total < 8<<20; i++ {
		n := 1 + r.IntN(100<<10)
		total += n
		k := fmt.Sprintf("k%d", i)
		if err := s.Push(ctx, k, Record{Value: val(k, n)}); err != nil {
			t.Fatal(err)
		}
		if i%97 == 0 {
			if _, err := s.Get(fmt.Sprintf("k%d", r.IntN(i+1))); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	t.Logf("pushed %d bytes; cache peak %d of limit %d, %d evictions", total, st.MaxCacheBytes, st.CacheLimit, st.Evictions)
	if st.MaxCacheBytes > st.CacheLimit {
		t.Fatalf("cache peaked at %d bytes, over its %d limit", st.MaxCacheBytes, st.CacheLimit)
	}
	if st.MaxCacheBytes < st.CacheLimit/2 || st.Evictions == 0 {
		t.Fatalf("cache barely used (peak %d, %d evictions): the test is not exercising eviction", st.MaxCacheBytes, st.Evictions)
	}
}

// TestPopulateOnColdRead checks that a read served from Pebble puts the
// record back in the cache.
func TestPopulateOnColdRead(t *testing.T) {
	s := openTest(t, Options{Mode: Hybrid, CacheMB: 1})
	for i := 0; i < 100; i++ {
		k := fmt.Sprintf("k%d", i)
		if err := s.Push(ctx, k, Record{Value: val(k, 40000)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	cached := func(k string) bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.mu.cache.m[k] != nil
	}
	if cached("k0") {
		t.Fatal("k0 should have been evicted by 4 MB of later pushes")
	}
	got, err := s.Get("k0")
	if err != nil || !bytes.Equal(got, val("k0", 40000)) {
		t.Fatalf("cold get: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !cached("k0") {
		if time.Now().After(deadline) {
			t.Fatalf("k0 not populated; stats %+v", s.Stats())
		}
		time.Sleep(time.Millisecond)
	}
	if s.Stats().Populates == 0 {
		t.Fatal("populate counter not incremented")
	}
}
