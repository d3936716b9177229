package persist

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"herd/internal/rng"
)

// draw takes n keys from s in batches of 256 and counts them.
func draw(t *testing.T, s Sampler, n int, r *rand.Rand) map[string]int {
	t.Helper()
	counts := map[string]int{}
	var keys []string
	for left := n; left > 0; left -= 256 {
		keys = s.Sample(keys, min(left, 256), r)
		for _, k := range keys {
			counts[k]++
		}
	}
	return counts
}

// checkFreq compares observed counts with expected probabilities using a
// 5-sigma binomial bound per key, and fails on any key drawn that should
// not be.
func checkFreq(t *testing.T, counts map[string]int, want map[string]float64, n int) {
	t.Helper()
	for k, c := range counts {
		if want[k] == 0 {
			t.Fatalf("drew %q (%d times), which has probability 0 or is not indexed", k, c)
		}
	}
	for k, p := range want {
		mean := p * float64(n)
		sd := math.Sqrt(float64(n) * p * (1 - p))
		if math.Abs(float64(counts[k])-mean) > 5*sd+1 {
			t.Errorf("key %q: drawn %d times, want %.1f ± %.1f", k, counts[k], mean, 5*sd)
		}
	}
}

// churn applies the same seeded pushes and deletes to a sampler and to a
// map (the naive model), and returns the model: live key → fields.
func churn(s Sampler, field string, seed uint64) map[string]map[string]float64 {
	r := rng.New(seed, "persist/test/churn", 0)
	live := map[string]map[string]float64{}
	for i := 0; i < 3000; i++ {
		k := fmt.Sprintf("k%d", r.IntN(200))
		if _, ok := live[k]; ok && r.IntN(3) == 0 {
			s.RemoveIndex(k)
			delete(live, k)
			continue
		}
		f := map[string]float64{field: float64(r.IntN(10)), "other": 1}
		if field == "time" {
			f[field] = float64(i)
		}
		s.BuildIndex(k, f)
		live[k] = f
	}
	return live
}

func TestUniformIndex(t *testing.T) {
	u := NewUniform("u")
	live := churn(u, "x", 1)
	if u.Len() != len(live) {
		t.Fatalf("Len %d, model %d", u.Len(), len(live))
	}
	want := map[string]float64{}
	for k := range live {
		want[k] = 1 / float64(len(live))
	}
	const n = 200000
	checkFreq(t, draw(t, u, n, rng.New(1, "persist/test/draw", 0)), want, n)
}

func TestPrioritizedIndex(t *testing.T) {
	const alpha = 0.7
	p := NewPrioritized("p", "priority", alpha)
	live := churn(p, "priority", 2)
	if p.Len() != len(live) {
		t.Fatalf("Len %d, model %d", p.Len(), len(live))
	}
	var sum float64
	for _, f := range live {
		sum += math.Pow(f["priority"], alpha)
	}
	want := map[string]float64{}
	for k, f := range live {
		want[k] = math.Pow(f["priority"], alpha) / sum
	}
	const n = 300000
	checkFreq(t, draw(t, p, n, rng.New(2, "persist/test/draw", 0)), want, n)
}

func TestPriorityTimeIndex(t *testing.T) {
	// A decay small enough that the churn's 3000 steps force rebases.
	const decay = 0.995
	p := NewPriorityTime("pt", "time", decay)
	live := churn(p, "time", 3)
	if p.Len() != len(live) {
		t.Fatalf("Len %d, model %d", p.Len(), len(live))
	}
	var tmax float64
	for _, f := range live {
		tmax = max(tmax, f["time"])
	}
	var sum float64
	for _, f := range live {
		sum += math.Pow(decay, tmax-f["time"])
	}
	want := map[string]float64{}
	for k, f := range live {
		want[k] = math.Pow(decay, tmax-f["time"]) / sum
	}
	const n = 300000
	checkFreq(t, draw(t, p, n, rng.New(3, "persist/test/draw", 0)), want, n)

	// Without the field, insertion order is the clock: the newest of two
	// keys is 1/decay times likelier.
	q := NewPriorityTime("q", "time", 0.5)
	q.BuildIndex("old", nil)
	q.BuildIndex("new", nil)
	c := draw(t, q, 100000, rng.New(4, "persist/test/draw", 0))
	checkFreq(t, c, map[string]float64{"old": 1.0 / 3, "new": 2.0 / 3}, 100000)
}

// TestSamplerStateRoundTrip checks MarshalBinary/UnmarshalBinary: the
// restored sampler draws the same keys from the same stream.
func TestSamplerStateRoundTrip(t *testing.T) {
	mk := []func() Sampler{
		func() Sampler { return NewUniform("u") },
		func() Sampler { return NewPrioritized("p", "priority", 0.6) },
		func() Sampler { return NewPriorityTime("pt", "time", 0.99) },
	}
	for i, f := range mk {
		a, b := f(), f()
		churn(a, map[int]string{0: "x", 1: "priority", 2: "time"}[i], 5)
		st, err := a.(interface{ MarshalBinary() ([]byte, error) }).MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		if err := b.(interface{ UnmarshalBinary([]byte) error }).UnmarshalBinary(st); err != nil {
			t.Fatalf("%s: %v", a.Name(), err)
		}
		ka := a.Sample(nil, 500, rng.New(9, "x", 0))
		kb := b.Sample(nil, 500, rng.New(9, "x", 0))
		if fmt.Sprint(ka) != fmt.Sprint(kb) || a.Len() != b.Len() {
			t.Fatalf("%s: restored sampler differs", a.Name())
		}
		// Truncated state must fail cleanly.
		if err := b.(interface{ UnmarshalBinary([]byte) error }).UnmarshalBinary(st[:len(st)/2]); err == nil {
			t.Fatalf("%s: truncated state accepted", a.Name())
		}
	}
}

// TestPrioritizedAcrossTiers samples by priority from a hybrid store whose
// cache holds a small fraction of the records: draws must follow the
// priorities whatever tier a record is on.
func TestPrioritizedAcrossTiers(t *testing.T) {
	s := openTest(t, Options{Mode: Hybrid, CacheMB: 1, Seed: 11,
		Samplers: []Sampler{NewPrioritized("per", "priority", 1)}})
	want := map[string]float64{}
	var sum float64
	for i := 0; i < 200; i++ {
		k := fmt.Sprintf("k%03d", i)
		p := float64(i % 7)
		if err := s.Push(ctx, k, Record{Value: val(k, 20000), Fields: map[string]float64{"priority": p}}); err != nil {
			t.Fatal(err)
		}
		want[k] = p
		sum += p
	}
	for k := range want {
		want[k] /= sum
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.CacheEntries > 100 {
		t.Fatalf("cache holds %d of 200 records; want most on disk", st.CacheEntries)
	}
	counts := map[string]int{}
	var items []Item
	const n = 20000
	for i := 0; i < n/64; i++ {
		var err error
		items, err = s.Sample(items, 64, "per")
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range items {
			counts[it.Key]++
			if len(it.Value) != 20000 {
				t.Fatalf("sampled %q with %d bytes", it.Key, len(it.Value))
			}
		}
	}
	checkFreq(t, counts, want, n/64*64)
}
