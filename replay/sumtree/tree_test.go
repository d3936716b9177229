package sumtree

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"herd/internal/rng"
	"herd/replay/internal/stattest"
)

var fanouts = []int{2, 4, 8, 16, 32, 64}

func TestNewRejectsBadInput(t *testing.T) {
	for _, tc := range []struct {
		n, k int
		want error
	}{
		{0, 16, ErrCapacity}, {-1, 16, ErrCapacity}, {10, 3, ErrFanout}, {10, 1, ErrFanout},
		{10, 128, ErrFanout}, {10, -2, ErrFanout},
	} {
		if _, err := New(tc.n, tc.k); !errors.Is(err, tc.want) {
			t.Errorf("New(%d, %d) = %v, want %v", tc.n, tc.k, err, tc.want)
		}
	}
	tr, err := New(5, 0)
	if err != nil || tr.Fanout() != DefaultFanout {
		t.Fatalf("New(5, 0): %v, fanout %v", err, tr)
	}
}

// TestLayout checks the promises of the Tree doc: every level starts on a
// 64-byte boundary, and the depth is ⌈log_K N⌉ (at least 1).
func TestLayout(t *testing.T) {
	for _, k := range fanouts {
		for _, n := range []int{1, 2, k - 1, k, k + 1, k * k, 1000, 4097} {
			if n < 1 {
				continue
			}
			tr, err := New(n, k)
			if err != nil {
				t.Fatal(err)
			}
			want := 1
			for c := k; c < n; c *= k {
				want++
			}
			if tr.Depth() != want {
				t.Errorf("K=%d N=%d: depth %d, want %d", k, n, tr.Depth(), want)
			}
			if len(tr.levels) != tr.Depth() {
				t.Errorf("K=%d N=%d: %d inner levels, want %d", k, n, len(tr.levels), tr.Depth())
			}
			for l, lv := range tr.levels {
				checkLevel(t, k, n, l, unsafePointer(lv), len(lv))
			}
			checkLevel(t, k, n, tr.Depth(), unsafePointer(tr.lv), len(tr.lv))
		}
	}
}

// stored is the value a leaf keeps of priority p (see Tree.Set): the
// reference rounds as the tree is documented to.
func stored(p float64) float64 { return float64(float32(p)) }

// checkLevel checks that level l starts on a 64-byte boundary and, below
// the root, holds whole groups of K.
func checkLevel(t *testing.T, k, n, l int, p unsafe.Pointer, length int) {
	t.Helper()
	if addr := uintptr(p); addr%cacheLine != 0 {
		t.Errorf("K=%d N=%d: level %d at %#x not 64-byte aligned", k, n, l, addr)
	}
	if l > 0 && length%k != 0 {
		t.Errorf("K=%d N=%d: level %d length %d not a multiple of K", k, n, l, length)
	}
}

// naive is the reference: a flat slice with linear prefix search
// that the fast tree is checked against.
type naive []float64

func (a naive) total() float64 {
	s := 0.0
	for _, v := range a {
		s += v
	}
	return s
}

// rangeOf returns the cumulative range [lo, hi) of leaf i.
func (a naive) rangeOf(i int) (lo, hi float64) {
	for _, v := range a[:i] {
		lo += v
	}
	return lo, lo + a[i]
}

// TestRandomOpsMatchNaive is the property test: after random sequences of
// Set, SetBatch (with repeated indices), SetLeaves+Propagate and
// Rebuild, every leaf matches, the root equals the sum of the leaves, and
// every search lands on a positive leaf whose range contains the target.
func TestRandomOpsMatchNaive(t *testing.T) {
	r := rng.New(7, "sumtree/test/ops", 0)
	for _, k := range fanouts {
		for _, n := range []int{1, 3, k + 1, 300, 1000} {
			tr, err := New(n, k)
			if err != nil {
				t.Fatal(err)
			}
			ref := make(naive, n)
			for step := 0; step < 80; step++ {
				randomOp(r, tr, ref)
				checkAgainst(t, tr, ref, r)
				if t.Failed() {
					t.Fatalf("K=%d N=%d failed at step %d", k, n, step)
				}
			}
		}
	}
}

func randomOp(r *rand.Rand, tr *Tree, ref naive) {
	n := len(ref)
	prio := func() float64 {
		switch r.IntN(4) {
		case 0:
			return 0
		case 1:
			return r.Float64() * 1e-6
		default:
			return r.Float64() * 10
		}
	}
	switch r.IntN(5) {
	case 0:
		i, p := r.IntN(n), prio()
		tr.Set(i, p)
		ref[i] = stored(p)
	case 1, 2:
		m := 1 + r.IntN(300)
		idx := make([]int, m)
		p := make([]float64, m)
		for b := range idx {
			idx[b], p[b] = r.IntN(n), prio()
			ref[idx[b]] = stored(p[b])
		}
		tr.SetBatch(idx, p)
	case 3:
		m := 1 + r.IntN(40)
		idx := make([]int, m)
		p := make([]float64, m)
		for b := range idx {
			idx[b], p[b] = r.IntN(n), prio()
			ref[idx[b]] = stored(p[b])
		}
		d := tr.SetLeaves(nil, idx, p)
		tr.Propagate(idx, d)
	case 4:
		if r.IntN(10) == 0 {
			tr.Rebuild()
		}
	}
}

func checkAgainst(t *testing.T, tr *Tree, ref naive, r *rand.Rand) {
	t.Helper()
	for i, v := range ref {
		if tr.Get(i) != v {
			t.Errorf("Get(%d) = %v, want %v", i, tr.Get(i), v)
		}
	}
	total := ref.total()
	if d := math.Abs(tr.Total() - total); d > 1e-9*math.Max(1, total) {
		t.Errorf("Total %v, sum of leaves %v", tr.Total(), total)
	}
	if err := tr.Verify(1e-9); err != nil {
		t.Error(err)
	}
	if total == 0 {
		if got := tr.SampleTo(make([]int, 3), r); got[0] != -1 {
			t.Errorf("sampling an all-zero tree gave %v, want -1", got)
		}
		return
	}
	targets := make([]float64, 64)
	for b := range targets {
		targets[b] = r.Float64() * total
	}
	targets[0] = 0
	targets[1] = math.Nextafter(total, 0)
	got := tr.FindTo(make([]int, len(targets)), targets)
	for b, i := range got {
		if i < 0 || i >= len(ref) || ref[i] <= 0 {
			t.Fatalf("FindTo(%v) = %d: outside or zero (len %d)", targets[b], i, len(ref))
		}
		lo, hi := ref.rangeOf(i)
		tol := 1e-9 * math.Max(1, total)
		if targets[b] < lo-tol || targets[b] >= hi+tol {
			t.Errorf("FindTo(%v) = %d with range [%v, %v) b=%d total=%v tree=%v drift=%v", targets[b], i, lo, hi, b, total, tr.Total(), tr.Drift())
		}
	}
}

// TestSampleFrequencies: over 1e6 draws the frequency of each leaf matches
// p_i/Σp by Pearson's chi-square test at significance 1e-3, for
// independent and stratified sampling and several fanouts. A negative
// control (the same test against a distorted distribution) must fail, so
// the test can fail.
func TestSampleFrequencies(t *testing.T) {
	const n, draws = 1000, 1_000_064
	r := rng.New(11, "sumtree/test/chi2", 0)
	p := make([]float64, n)
	idx := make([]int, n)
	for i := range p {
		idx[i] = i
		p[i] = r.Float64() * r.Float64() // skewed
	}
	p[3], p[500] = 0, 0
	sum := naive(p).total()
	probs := make([]float64, n)
	for i := range p {
		probs[i] = p[i] / sum
	}
	for _, k := range []int{2, 16} {
		for _, stratified := range []bool{false, true} {
			tr, _ := New(n, k)
			tr.SetBatch(idx, p)
			counts := make([]int, n)
			dst := make([]int, 128)
			for d := 0; d < draws; d += len(dst) {
				if stratified {
					tr.SampleStratifiedTo(dst, r)
				} else {
					tr.SampleTo(dst, r)
				}
				for _, i := range dst {
					counts[i]++
				}
			}
			stat, pv := stattest.ChiSquare(counts, probs)
			if pv < 1e-3 {
				t.Errorf("K=%d stratified=%v: chi2 = %.1f, p = %.2g < 1e-3", k, stratified, stat, pv)
			}
			// Negative control: a 2% distortion of one leaf is detected.
			bad := append([]float64(nil), probs...)
			bad[1] *= 1.3
			bad[2] = max(0, bad[2]-probs[1]*0.3)
			if _, pv := stattest.ChiSquare(counts, bad); pv >= 1e-3 && probs[1] > 1e-3 {
				t.Errorf("K=%d: negative control not rejected (p = %.2g)", k, pv)
			}
		}
	}
}

// TestNeverZeroOrOutside drives the tree into the states where a float
// sum tree fails (PAL's C++ tree returned indices at or beyond the
// capacity): huge priorities replaced by tiny ones so inner nodes hold
// rounding residue, whole groups zeroed, targets at the very top of the
// range. No draw may return an index outside [0, N) or a zero leaf.
func TestNeverZeroOrOutside(t *testing.T) {
	r := rng.New(13, "sumtree/test/safety", 0)
	const n = 5000
	for _, k := range fanouts {
		tr, _ := New(n, k)
		prio := make([]float64, n)
		for round := 0; round < 50; round++ {
			for j := 0; j < 500; j++ {
				i := r.IntN(n)
				var p float64
				switch r.IntN(4) {
				case 0:
					p = 1e15 * r.Float64()
				case 1:
					p = 0
				default:
					p = 1e-3 * r.Float64()
				}
				tr.Set(i, p)
				prio[i] = p
			}
			// Zero all huge ones: inner nodes keep residue of order 1e-1.
			for i, p := range prio {
				if p > 1 {
					tr.Set(i, 0)
					prio[i] = 0
				}
			}
			dst := make([]int, 256)
			targets := make([]float64, 256)
			for b := range targets {
				targets[b] = tr.Total() * (1 - math.Ldexp(r.Float64(), -40*(b%2)))
			}
			for _, got := range [][]int{tr.SampleTo(dst, r), tr.FindTo(make([]int, 256), targets)} {
				for _, i := range got {
					if i < 0 || i >= n || prio[i] <= 0 {
						t.Fatalf("K=%d round %d: draw %d outside or zero-priority (total %v)", k, round, i, tr.Total())
					}
				}
			}
		}
		if tr.Drift() == 0 {
			t.Logf("K=%d: no drift produced (test weaker than intended)", k)
		}
		tr.Rebuild()
		if d := tr.Drift(); d != 0 {
			t.Errorf("K=%d: drift %v after Rebuild", k, d)
		}
	}
}

// TestSplitDescent checks DescendInner+DescendLeaves against FindTo.
func TestSplitDescent(t *testing.T) {
	r := rng.New(17, "sumtree/test/split", 0)
	for _, k := range fanouts {
		tr, _ := New(777, k)
		for i := 0; i < 777; i++ {
			if r.IntN(3) > 0 {
				tr.Set(i, r.Float64())
			}
		}
		u := make([]float64, 100)
		for b := range u {
			u[b] = r.Float64() * tr.Total()
		}
		want := tr.FindTo(make([]int, 100), u)
		v := append([]float64(nil), u...)
		g := tr.DescendInner(nil, v)
		got := tr.DescendLeaves(nil, g, v)
		for b := range got {
			if got[b] != want[b] {
				t.Fatalf("K=%d: split descent %d, FindTo %d", k, got[b], want[b])
			}
		}
	}
}

// TestZeroAllocs: the batched hot paths allocate nothing.
func TestZeroAllocs(t *testing.T) {
	tr, _ := New(4096, 16)
	r := rng.New(19, "sumtree/test/alloc", 0)
	idx := make([]int, 128)
	p := make([]float64, 128)
	for b := range idx {
		idx[b], p[b] = r.IntN(4096), r.Float64()
	}
	dst := make([]int, 128)
	d := make([]float64, 128)
	allocs := testing.AllocsPerRun(100, func() {
		tr.SetBatch(idx, p)
		tr.SampleTo(dst, r)
		tr.SampleStratifiedTo(dst, r)
		d = tr.SetLeaves(d, idx, p)
		tr.Propagate(idx, d)
	})
	if allocs != 0 {
		t.Errorf("%v allocations per run, want 0", allocs)
	}
}

// TestNeverZeroOrOutsideWide is the adversarial property test of the
// float32 leaves: priorities log-uniform over the whole float32 range
// (subnormals included) and below it (they round to zero), zeros, and
// huge leaves replaced by tiny ones without a rebuild, so inner nodes hold
// rounding residue far larger than the leaves under them. Every search
// path (SampleTo, SampleStratifiedTo, FindTo with targets at and past the
// ends, the split descent, the shared descent) must give a leaf inside
// [0, N) whose stored priority is positive, or -1 where the split and
// shared paths reject. 2^20 draws here; `herd bench replay --safety
// --decades 83` runs tens of millions (docs/BENCHMARKS.md).
func TestNeverZeroOrOutsideWide(t *testing.T) {
	r := rng.New(23, "sumtree/test/wide", 0)
	const n = 4099 // not a multiple of any K: padding leaves exist
	prio := func() float64 {
		switch r.IntN(10) {
		case 0, 1:
			return 0
		case 2:
			return math.Ldexp(r.Float64(), -150-r.IntN(30)) // rounds to 0 or the smallest subnormal
		case 3:
			return MaxPriority * r.Float64()
		default:
			return math.Min(MaxPriority, math.Ldexp(1+r.Float64(), -149+r.IntN(277)))
		}
	}
	draws := 0
	for _, k := range fanouts {
		tr, _ := New(n, k)
		dst := make([]int, 128)
		targets := make([]float64, 128)
		for round := 0; round < 36; round++ {
			for j := 0; j < 400; j++ {
				tr.Set(r.IntN(n), prio())
			}
			// Lower every huge leaf to a tiny one or to zero, and zero
			// its whole group now and then: residue of order 1e22 stays
			// in the inner nodes above leaves that hold almost or exactly
			// nothing.
			for i := 0; i < n; i++ {
				if tr.Get(i) > 1e30 {
					switch r.IntN(3) {
					case 0:
						tr.Set(i, math.Ldexp(1, -140))
					case 1:
						tr.Set(i, 0)
					default:
						for j := i &^ (k - 1); j < min(n, i&^(k-1)+k); j++ {
							tr.Set(j, 0)
						}
					}
				}
			}
			check := func(what string, i int, reject bool) {
				t.Helper()
				draws++
				if reject && i == -1 {
					return
				}
				if i < 0 || i >= n || tr.Get(i) <= 0 {
					t.Fatalf("K=%d round %d: %s gave %d: outside or zero priority (total %v)", k, round, what, i, tr.Total())
				}
			}
			total := tr.Total()
			for b := range targets {
				switch b % 4 {
				case 0:
					targets[b] = total * r.Float64()
				case 1:
					targets[b] = math.Nextafter(total, 0)
				case 2:
					targets[b] = total * (1 + r.Float64()) // past the end: clamps
				default:
					targets[b] = 0
				}
			}
			for rep := 0; rep < 8; rep++ {
				for _, i := range tr.SampleTo(dst, r) {
					check("SampleTo", i, false)
				}
				for _, i := range tr.SampleStratifiedTo(dst, r) {
					check("SampleStratifiedTo", i, false)
				}
				for _, i := range tr.FindTo(dst, targets) {
					check("FindTo", i, false)
				}
				u := make([]float64, len(targets))
				for b := range u {
					u[b] = total * r.Float64()
				}
				us := append([]float64(nil), u...)
				for _, i := range tr.DescendLeaves(nil, tr.DescendInner(nil, u), u) {
					check("DescendLeaves", i, true)
				}
				for b, g := range tr.DescendInnerShared(nil, us) {
					check("LeafInGroup", tr.LeafInGroup(g, us[b]), true)
				}
			}
		}
	}
	if draws < 1<<20 {
		t.Errorf("%d draws, want at least 2^20", draws)
	}
}
