package replay

import (
	"errors"
	"math"
	"strings"
	"testing"

	"herd/internal/rng"
	"herd/replay/internal/stattest"
)

func TestConfigValidateReportsEverything(t *testing.T) {
	_, err := NewPrioritized(Config{Capacity: -1, ObsSize: 0, Alpha: 2, Beta: -1, Fanout: 3})
	if !errors.Is(err, ErrConfig) {
		t.Fatalf("got %v, want ErrConfig", err)
	}
	for _, want := range []string{"Capacity", "ObsSize", "Alpha", "Beta", "Fanout"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
	if _, err := NewUniform(Config{Capacity: 10}); !errors.Is(err, ErrConfig) {
		t.Errorf("missing ObsSize: got %v", err)
	}
}

func TestInputErrors(t *testing.T) {
	for _, lock := range []Locking{TwoLock, GlobalLock} {
		p := mustPrioritized(t, Config{Capacity: 8, ObsSize: 2, Locking: lock})
		r := rng.New(1, "test", 0)
		var s Sample
		if err := p.Sample(&s, 1, r); !errors.Is(err, ErrEmpty) {
			t.Errorf("sampling empty: %v", err)
		}
		bad := makeBatch(2, 3, 1, 0) // obs of 3, buffer wants 2
		if err := p.Add(bad); !errors.Is(err, ErrShape) {
			t.Errorf("wrong obs length: %v", err)
		}
		b := makeBatch(2, 2, 1, 0)
		b.Terminated = b.Terminated[:1]
		if err := p.Add(b); !errors.Is(err, ErrShape) {
			t.Errorf("mismatched lengths: %v", err)
		}
		if err := p.Add(nil); !errors.Is(err, ErrShape) {
			t.Errorf("nil batch: %v", err)
		}
		if err := p.Add(makeBatch(9, 2, 1, 0)); !errors.Is(err, ErrTooMany) {
			t.Errorf("batch over capacity: %v", err)
		}
		if err := p.Add(makeBatch(3, 2, 1, 0)); err != nil {
			t.Fatal(err)
		}
		if err := p.Sample(&s, 4, r); !errors.Is(err, ErrTooMany) {
			t.Errorf("sampling 4 of 3: %v", err)
		}
		if err := p.Sample(&s, 2, r); err != nil {
			t.Fatal(err)
		}
		before, _, _ := p.Priority(s.Index[0])
		// 1e70^0.6 = 1e42 is past the float32 leaves' range.
		for _, bad := range []float64{math.NaN(), math.Inf(1), -1, 1e70} {
			if _, err := p.UpdatePriorities(s.Index, s.Gen, []float64{5, bad}); !errors.Is(err, ErrPriority) {
				t.Errorf("priority %v: %v", bad, err)
			}
		}
		if after, _, _ := p.Priority(s.Index[0]); after != before {
			t.Errorf("a rejected update changed priority %v → %v", before, after)
		}
		if _, err := p.UpdatePriorities(s.Index, s.Gen[:1], []float64{1, 1}); !errors.Is(err, ErrIndex) {
			t.Errorf("mismatched lengths: %v", err)
		}
		if _, err := p.UpdatePriorities([]int{8}, []uint64{1}, []float64{1}); !errors.Is(err, ErrIndex) {
			t.Errorf("index out of range: %v", err)
		}
		if err := p.AddWithPriorities(makeBatch(1, 2, 1, 0), []float64{-2}); !errors.Is(err, ErrPriority) {
			t.Errorf("negative initial priority: %v", err)
		}
		if err := p.AddWithPriorities(makeBatch(1, 2, 1, 0), []float64{1e300}); !errors.Is(err, ErrPriority) {
			t.Errorf("initial priority past the tree's range: %v", err)
		}
		// The largest accepted priority is stored finite.
		if _, err := p.UpdatePriorities(s.Index[:1], s.Gen[:1], []float64{math.Pow(math.MaxFloat32, 1/0.6)}); err != nil {
			t.Errorf("largest storable priority: %v", err)
		} else if pr, _, _ := p.Priority(s.Index[0]); math.IsInf(pr, 0) || pr < 3e38 {
			t.Errorf("largest storable priority stored as %v", pr)
		}
		if err := p.SetBeta(1.5); !errors.Is(err, ErrBeta) {
			t.Errorf("beta 1.5: %v", err)
		}
		if err := p.SetBeta(math.NaN()); !errors.Is(err, ErrBeta) {
			t.Errorf("beta NaN: %v", err)
		}
	}
}

// TestFIFOEviction: after inserting 25 transitions into 10 slots, the
// buffer holds exactly the last 10, each in slot id mod 10 with
// generation id/10 + 1.
func TestFIFOEviction(t *testing.T) {
	for _, mk := range []func() Buffer{
		func() Buffer { b, _ := NewUniform(Config{Capacity: 10, ObsSize: 3}); return b },
		func() Buffer { return mustPrioritized(t, Config{Capacity: 10, ObsSize: 3}) },
	} {
		buf := mk()
		id := 0
		for _, n := range []int{3, 1, 7, 10, 4} {
			if err := buf.Add(makeBatch(n, 3, 1, id)); err != nil {
				t.Fatal(err)
			}
			id += n
		}
		if buf.Len() != 10 {
			t.Fatalf("Len %d", buf.Len())
		}
		var s Sample
		seen := map[int]bool{}
		r := rng.New(2, "test", 0)
		for k := 0; k < 50; k++ {
			if err := buf.Sample(&s, 10, r); err != nil {
				t.Fatal(err)
			}
			for i := range s.Index {
				got := checkRow(&s, i, 3, 1)
				if got < 15 || got >= 25 {
					t.Fatalf("%T: sampled id %d, want 15…24", buf, got)
				}
				if s.Index[i] != got%10 || s.Gen[i] != uint64(got/10+1) {
					t.Fatalf("%T: id %d in slot %d gen %d", buf, got, s.Index[i], s.Gen[i])
				}
				seen[got] = true
			}
		}
		if len(seen) != 10 {
			t.Errorf("%T: saw %d distinct ids, want 10", buf, len(seen))
		}
	}
}

// TestImportanceWeights checks Prob and Weight against the formulas of
// the Prioritized doc: P(i) = p_i^α/Σp^α, w_i = (N·P(i))^−β / max_j w_j,
// with p_i^α as the sum tree stores it (rounded to float32).
func TestImportanceWeights(t *testing.T) {
	const n, alpha, beta = 6, 0.7, 0.5
	pow := func(x float64) float64 { return float64(float32(math.Pow(x, alpha))) }
	p := mustPrioritized(t, Config{Capacity: n, ObsSize: 1, Alpha: alpha, Beta: beta})
	if err := p.Add(makeBatch(n, 1, 1, 0)); err != nil {
		t.Fatal(err)
	}
	raw := []float64{0.5, 1, 2, 4, 8, 0.1}
	idx := []int{0, 1, 2, 3, 4, 5}
	gen := []uint64{1, 1, 1, 1, 1, 1}
	if m, err := p.UpdatePriorities(idx, gen, raw); err != nil || m != n {
		t.Fatalf("update: %d, %v", m, err)
	}
	sum := 0.0
	for _, x := range raw {
		sum += pow(x)
	}
	var s Sample
	if err := p.Sample(&s, n, rng.New(3, "test", 0)); err != nil {
		t.Fatal(err)
	}
	maxW := 0.0
	for _, i := range s.Index {
		maxW = max(maxW, math.Pow(n*pow(raw[i])/sum, -beta))
	}
	for b, i := range s.Index {
		prob := pow(raw[i]) / sum
		if !near(s.Prob[b], prob, 1e-12) {
			t.Errorf("Prob[%d] (slot %d) = %v, want %v", b, i, s.Prob[b], prob)
		}
		w := math.Pow(n*prob, -beta) / maxW
		if !near(float64(s.Weight[b]), w, 1e-6) {
			t.Errorf("Weight[%d] (slot %d) = %v, want %v", b, i, s.Weight[b], w)
		}
	}
	// β = 0 gives weight 1 everywhere.
	if err := p.SetBeta(0); err != nil {
		t.Fatal(err)
	}
	if err := p.Sample(&s, n, rng.New(4, "test", 0)); err != nil {
		t.Fatal(err)
	}
	for _, w := range s.Weight {
		if w != 1 {
			t.Fatalf("β=0: weight %v", w)
		}
	}
}

// TestStaleUpdateIgnored: an update for a slot that has been overwritten
// since it was sampled is dropped; one for the current generation is
// applied.
func TestStaleUpdateIgnored(t *testing.T) {
	for _, lock := range []Locking{TwoLock, GlobalLock} {
		p := mustPrioritized(t, Config{Capacity: 4, ObsSize: 1, Alpha: 1, Locking: lock})
		_ = p.Add(makeBatch(4, 1, 1, 0))
		var s Sample
		if err := p.Sample(&s, 1, rng.New(5, "test", 0)); err != nil {
			t.Fatal(err)
		}
		slot, oldGen := s.Index[0], s.Gen[0]
		_ = p.Add(makeBatch(4, 1, 1, 4)) // overwrites every slot
		m, err := p.UpdatePriorities([]int{slot}, []uint64{oldGen}, []float64{123})
		if err != nil || m != 0 {
			t.Fatalf("stale update: applied %d, err %v", m, err)
		}
		got, g, _ := p.Priority(slot)
		if got != 1 || g != oldGen+1 {
			t.Errorf("after stale update: priority %v gen %d, want 1 and %d", got, g, oldGen+1)
		}
		m, err = p.UpdatePriorities([]int{slot}, []uint64{oldGen + 1}, []float64{123})
		if err != nil || m != 1 {
			t.Fatalf("fresh update: applied %d, err %v", m, err)
		}
		if got, _, _ := p.Priority(slot); got != 123 {
			t.Errorf("fresh update: priority %v", got)
		}
		// New transitions enter at the running maximum (123 now).
		_ = p.Add(makeBatch(1, 1, 1, 8))
		if got, _, _ := p.Priority(0); got != 123 {
			t.Errorf("new transition at %v, want running max 123", got)
		}
	}
}

// TestSampleFrequencies: over 1e6 draws, the buffer samples slot i with
// frequency p_i^α/Σp^α (Pearson chi-square, significance 1e-3); stratified
// sampling and runs under -race use 2e5 draws. A negative control must be rejected.
func TestSampleFrequencies(t *testing.T) {
	const n, alpha = 300, 0.6
	r := rng.New(6, "replay/test/chi2", 0)
	raw := make([]float64, n)
	idx := make([]int, n)
	gen := make([]uint64, n)
	for i := range raw {
		raw[i] = r.Float64() * 3
		idx[i], gen[i] = i, 1
	}
	raw[7] = 0
	sum := 0.0
	for _, x := range raw {
		sum += math.Pow(x, alpha)
	}
	probs := make([]float64, n)
	for i := range raw {
		probs[i] = math.Pow(raw[i], alpha) / sum
	}
	for _, stratified := range []bool{false, true} {
		p := mustPrioritized(t, Config{Capacity: n, ObsSize: 1, Alpha: alpha, Stratified: stratified})
		_ = p.Add(makeBatch(n, 1, 1, 0))
		if _, err := p.UpdatePriorities(idx, gen, raw); err != nil {
			t.Fatal(err)
		}
		counts := make([]int, n)
		var s Sample
		draws := 1_000_192
		if raceEnabled || stratified {
			// The race detector makes every row copy ~20x slower; the
			// statistics are checked at full size in the normal run
			// (and for stratified sampling at the tree level).
			draws = 200_192
		}
		for d := 0; d < draws; d += 256 {
			if err := p.Sample(&s, 256, r); err != nil {
				t.Fatal(err)
			}
			for _, i := range s.Index {
				counts[i]++
			}
		}
		if stat, pv := stattest.ChiSquare(counts, probs); pv < 1e-3 {
			t.Errorf("stratified=%v: chi2 %.1f, p = %.2g < 1e-3", stratified, stat, pv)
		}
		// Negative control: α = 1 instead of 0.6 must be rejected.
		wrong := make([]float64, n)
		ws := 0.0
		for i := range raw {
			ws += raw[i]
		}
		for i := range raw {
			wrong[i] = raw[i] / ws
		}
		if _, pv := stattest.ChiSquare(counts, wrong); pv >= 1e-3 {
			t.Errorf("negative control (α=1) not rejected: p = %.2g", pv)
		}
	}
}

// TestZeroAllocsSteadyState: Add, Sample and UpdatePriorities allocate
// nothing once dst and the scratch pool are warm.
func TestZeroAllocsSteadyState(t *testing.T) {
	p := mustPrioritized(t, Config{Capacity: 1024, ObsSize: 4})
	b := makeBatch(32, 4, 1, 0)
	r := rng.New(8, "test", 0)
	for i := 0; i < 40; i++ {
		_ = p.Add(b)
	}
	var s Sample
	pr := make([]float64, 128)
	for i := range pr {
		pr[i] = 1 + float64(i)
	}
	run := func() {
		_ = p.Add(b)
		if err := p.Sample(&s, 128, r); err != nil {
			t.Fatal(err)
		}
		if _, err := p.UpdatePriorities(s.Index, s.Gen, pr); err != nil {
			t.Fatal(err)
		}
	}
	run()
	if raceEnabled {
		t.Skip("allocation counts are meaningless under -race (sync.Pool drops items)")
	}
	if a := testing.AllocsPerRun(50, run); a != 0 {
		t.Errorf("%v allocations per Add+Sample+Update, want 0", a)
	}
}
