package sumtree

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"unsafe"
)

// Errors returned by the constructor and by Verify. They are checked with
// errors.Is.
var (
	// ErrCapacity reports a capacity below 1 or too large to index.
	ErrCapacity = errors.New("sumtree: capacity must be in [1, 2^40]")
	// ErrFanout reports a fanout that is not a power of two in [2, 64].
	ErrFanout = errors.New("sumtree: fanout must be a power of two in [2, 64]")
	// ErrDrift reports an inner node that differs from the sum of its
	// children by more than the tolerance given to Verify.
	ErrDrift = errors.New("sumtree: inner node drifted from the sum of its children")
)

// DefaultFanout is the fanout K chosen by measurement on the project's
// reference machine (2-core AMD EPYC, 1M slots, batch 128): K = 8 had the
// lowest tree_set + tree_sample time in every sweep (K = 16 sets faster
// but samples slower; see docs/BENCHMARKS.md). Those sweeps predate the
// float32 leaves, which made K = 16's leaf group one cache line and its
// sample as fast as K = 8's in the tree benchmarks (docs/BENCHMARKS.md, "Replay"); K stays 8 until the buffers, whose shared-mode descent is
// specialised for K = 8, are swept again.
const DefaultFanout = 8

// cacheLine is the alignment of every level, so that each group of K
// siblings (K·8 bytes) starts on a 64-byte boundary: one line for K ≤ 8,
// K/8 adjacent lines otherwise.
const cacheLine = 64

// chunk bounds the stack scratch used by the batched operations; larger
// batches are processed chunk by chunk, so nothing is allocated.
const chunk = 256

// Tree is a K-ary sum tree over a fixed number of non-negative priorities
// (PAL, Algorithm 2): every inner node holds the sum of its K children,
// so the root holds the total and a prefix-sum search from the root finds
// the leaf whose cumulative range contains a target mass.
//
// # Layout
//
// The tree is an implicit array. Level 0 is the root; level D (the depth)
// holds the leaves, with D the smallest integer such that K^D ≥ capacity.
// Node i of level l has its children at positions i·K … i·K+K-1 of level
// l+1 and its parent at i/K of level l-1. The inner levels live in one
// float64 slice, the leaves in a float32 slice of their own; each level
// starts on a 64-byte boundary and is padded with zeros to a multiple of
// K, so every sibling group is contiguous and cache-line aligned (the root
// is padded to a full line). Leaves are one contiguous slice, indexed by
// slot.
//
// Leaves are float32 and inner nodes float64: the leaves are
// most of the memory and most of the cache misses, and halving them makes
// a K=16 leaf group one cache line instead of two. Every sum, at every
// level, is still float64 arithmetic on exactly widened leaf values, so the
// searches' rounding is what it was with float64 leaves; what changes is
// that Set rounds the priority it stores (see Set).
//
// # Costs
//
//	Get, Total        O(1)
//	Set               O(log_K N): one add per inner level (delta propagation)
//	SetBatch          O(B·log_K N), the B leaf writes first so their cache
//	                  misses overlap, then one pass per level; the deltas
//	                  to the root are summed in registers (walked once)
//	SampleTo / FindTo O(B·K·log_K N) work, but the B descents run level by
//	                  level so the memory latency of one overlaps the others;
//	                  the in-group scan is branch-free
//	Rebuild           O(N)
//
// Memory is about N·(4 + 8/(K-1)) bytes.
//
// # Numerical safety
//
// Sums are float64 (leaves float32, widened exactly before any
// arithmetic). Set propagates the difference between the new and the old
// stored priority, which accumulates rounding error in inner nodes; Drift and
// Verify measure it and Rebuild recomputes every inner node exactly from its
// children (Reverb rebuilds when the error passes 1e-4; callers that apply
// very many updates should call Rebuild every few capacity's worth of
// updates — the replay buffers do). Whatever the drift, a search never
// returns a leaf outside [0, Cap()) or a leaf whose priority is zero: a
// rarely taken branch replaces a zero child picked by a rounding overshoot
// with the group's last positive child, and a descent that still ends on a
// zero leaf (an inner node that holds only rounding residue) falls back to
// the nearest positive leaf, found by scanning outward from it. Only a tree
// with no positive leaf gives -1.
//
// # Concurrency
//
// A Tree is not safe for concurrent use by writers; concurrent readers
// (Get, Total, the search methods) are safe with each other. The replay
// package guards it with one lock for the leaf level and one for the inner
// levels (PAL, Algorithm 3), through SetLeaves/Propagate and
// DescendInner/DescendLeaves.
type Tree struct {
	k int
	// shift is log2 K. Every use masks it with &63: a Go shift by a
	// variable must give 0 for counts ≥ 64, which costs six instructions
	// more than the one shift a bounded count compiles to (a third of
	// propagate's inner loop).
	shift  uint
	n      int
	depth  int
	levels [][]float64 // inner levels: levels[0] is the root (length 1), levels[depth-1] the leaves' parents
	counts []int       // nodes in use per level, leaves (counts[depth]) included
	lv     []float32   // the leaf level, padded with zeros to a multiple of K
	leaves []float32   // lv[:n]
	w      *writeScratch
}

// writeScratch is the scratch of SetBatch and Propagate, kept with the tree
// because they are writers (exclusive access): a stack array would be
// zeroed on every call, 4 KiB for a batch of 128, a twentieth of
// tree_set's instructions.
type writeScratch struct {
	d    [chunk]float64
	node [chunk]int
}

// leaf is the type of a level's entries: float32 leaves, float64 inner
// nodes. The descents are written once for both.
type leaf interface{ ~float32 | ~float64 }

// MaxPriority is the largest priority a leaf holds (math.MaxFloat32):
// leaves are float32. Callers reject larger ones (replay does, with
// ErrPriority).
const MaxPriority = math.MaxFloat32

// New returns a tree of capacity leaves, all zero, with fanout k (0 means
// DefaultFanout).
func New(capacity, k int) (*Tree, error) {
	if k == 0 {
		k = DefaultFanout
	}
	if k < 2 || k > 64 || k&(k-1) != 0 {
		return nil, fmt.Errorf("%w: got %d", ErrFanout, k)
	}
	if capacity < 1 || capacity > 1<<40 {
		return nil, fmt.Errorf("%w: got %d", ErrCapacity, capacity)
	}
	t := &Tree{k: k, shift: uint(bits.TrailingZeros(uint(k))), n: capacity, w: new(writeScratch)}
	// Count nodes per level from the leaves up.
	counts := []int{capacity}
	for c := capacity; ; {
		c = (c + k - 1) / k
		counts = append(counts, c)
		if c == 1 {
			break
		}
	}
	// counts is leaves-first; reverse to root-first.
	for i, j := 0, len(counts)-1; i < j; i, j = i+1, j-1 {
		counts[i], counts[j] = counts[j], counts[i]
	}
	t.counts = counts
	t.depth = len(counts) - 1
	inner := counts[:t.depth]
	const perLine = cacheLine / 8
	sizes := make([]int, len(inner))
	total := 0
	for l, c := range inner {
		s := c
		if l > 0 {
			s = roundUp(c, k)
		}
		s = roundUp(s, perLine)
		sizes[l] = s
		total += s
	}
	buf := aligned[float64](total)
	off := 0
	t.levels = make([][]float64, len(inner))
	for l := range inner {
		n := roundUp(inner[l], k)
		if l == 0 {
			n = 1
		}
		t.levels[l] = buf[off : off+n : off+n]
		off += sizes[l]
	}
	n := roundUp(capacity, k)
	t.lv = aligned[float32](n)[:n:n]
	t.leaves = t.lv[:capacity:capacity]
	return t, nil
}

// aligned returns n zeros starting on a cache-line boundary.
func aligned[F leaf](n int) []F {
	var z F
	size := int(unsafe.Sizeof(z))
	buf := make([]F, n+cacheLine/size)
	off := 0
	for uintptr(unsafe.Pointer(&buf[off]))%cacheLine != 0 {
		off++
	}
	return buf[off : off+n : off+n]
}

func roundUp(x, m int) int { return (x + m - 1) / m * m }

// Cap returns the number of leaves.
func (t *Tree) Cap() int { return t.n }

// Fanout returns K.
func (t *Tree) Fanout() int { return t.k }

// Depth returns the number of levels below the root (log_K of the capacity,
// rounded up, at least 1).
func (t *Tree) Depth() int { return t.depth }

// Total returns the sum of all priorities (the root).
func (t *Tree) Total() float64 { return t.levels[0][0] }

// Get returns the priority of leaf i, as stored (see Set). It panics if i
// is outside [0, Cap()).
func (t *Tree) Get(i int) float64 { return float64(t.leaves[i]) }

// Set sets leaf i to priority p and updates its ancestors. The caller
// guarantees 0 ≤ i < Cap() and 0 ≤ p ≤ MaxPriority (the replay package
// checks user input). The leaf stores p rounded to float32 (relative error
// at most 2^-24; below 2^-126 fewer digits are kept, below 2^-150 it is
// zero); Get, Total and the searches all use the stored value, so draws
// are exactly proportional to what Get returns.
func (t *Tree) Set(i int, p float64) {
	d := t.setLeaf(i, p)
	for l := t.depth - 1; l >= 0; l-- {
		i >>= t.shift & 63
		t.levels[l][i] += d
	}
}

// SetBatch sets leaf idx[b] to p[b] for every b, in order (a repeated index
// ends with its last priority). It panics if the lengths differ.
//
// The leaf writes and their deltas are done first, for the whole chunk, so
// that their cache misses overlap; then each inner level is updated in one
// pass, and the deltas reaching the root are summed in registers, so the
// shared ancestors at the top are walked once per chunk, not once per item.
// No sorting is needed because delta propagation commutes.
func (t *Tree) SetBatch(idx []int, p []float64) {
	if len(idx) != len(p) {
		panic("sumtree: SetBatch: len(idx) != len(p)")
	}
	w := t.w
	for len(idx) > 0 {
		n := min(len(idx), chunk)
		ci, cp := idx[:n], p[:n]
		dd, nn := w.d[:n], w.node[:n]
		t.setLeaves(dd, nn, ci, cp)
		t.propagate(dd, nn)
		idx, p = idx[n:], p[n:]
	}
}

// setLeaf stores p (rounded to float32) in leaf i and returns the change
// of the leaf, exactly as the inner levels must see it.
func (t *Tree) setLeaf(i int, p float64) float64 {
	v := float32(p)
	d := float64(v) - float64(t.leaves[i])
	t.leaves[i] = v
	return d
}

// setLeaves writes the leaves and records each delta and leaf index.
func (t *Tree) setLeaves(d []float64, node []int, idx []int, p []float64) {
	leaves := t.leaves
	d = d[:len(idx)]
	node = node[:len(idx)]
	p = p[:len(idx)]
	for b, i := range idx {
		v := float32(p[b])
		old := leaves[i]
		leaves[i] = v
		d[b] = float64(v) - float64(old)
		node[b] = i
	}
}

// propagate adds d[b] to every inner ancestor of leaf node[b]; node is
// used as scratch.
func (t *Tree) propagate(d []float64, node []int) {
	node = node[:len(d)]
	for l := t.depth - 1; l >= 1; l-- {
		switch lv := t.levels[l]; t.k {
		case 2:
			up(lv, node, d, 1)
		case 4:
			up(lv, node, d, 2)
		case 8:
			up(lv, node, d, 3)
		case 16:
			up(lv, node, d, 4)
		case 32:
			up(lv, node, d, 5)
		default:
			up(lv, node, d, 6)
		}
	}
	// The root: four independent accumulators so the adds pipeline.
	var s0, s1, s2, s3 float64
	b := 0
	for ; b+4 <= len(d); b += 4 {
		s0 += d[b]
		s1 += d[b+1]
		s2 += d[b+2]
		s3 += d[b+3]
	}
	for ; b < len(d); b++ {
		s0 += d[b]
	}
	t.levels[0][0] += (s0 + s1) + (s2 + s3)
}

// up moves every node[b] to its parent (node[b] >> shift) in lv and adds
// d[b] there. Called with a constant shift it is inlined with the shift as
// an immediate: a variable count must sit in CX, which cost three
// register moves per entry (a sixth of tree_set's instructions).
func up(lv []float64, node []int, d []float64, shift uint) {
	d = d[:len(node)]
	for b, i := range node {
		j := i >> (shift & 63)
		node[b] = j
		lv[j] += d[b]
	}
}

// SetLeaves is the first half of SetBatch, for callers that guard the leaf
// level and the inner levels with different locks (PAL, Algorithm 3):
// it writes the leaves only and returns, in deltas (resized as needed), the
// change of each leaf, to be passed to Propagate with the same idx. Between
// the two calls Get sees the new priorities while Total and the searches
// still see the old sums.
func (t *Tree) SetLeaves(deltas []float64, idx []int, p []float64) []float64 {
	if len(idx) != len(p) {
		panic("sumtree: SetLeaves: len(idx) != len(p)")
	}
	if cap(deltas) < len(idx) {
		deltas = make([]float64, len(idx))
	}
	deltas = deltas[:len(idx)]
	for b, i := range idx {
		deltas[b] = t.setLeaf(i, p[b])
	}
	return deltas
}

// Propagate adds deltas[b] to every inner ancestor of leaf idx[b]: the
// second half of SetBatch (see SetLeaves).
func (t *Tree) Propagate(idx []int, deltas []float64) {
	if len(idx) != len(deltas) {
		panic("sumtree: Propagate: len(idx) != len(deltas)")
	}
	node := t.w.node[:]
	for len(idx) > 0 {
		n := min(len(idx), chunk)
		copy(node[:n], idx[:n])
		t.propagate(deltas[:n], node[:n])
		idx, deltas = idx[n:], deltas[n:]
	}
}

// SampleTo draws len(dst) leaves independently with probability
// proportional to their priority (target masses u·Total with u uniform in
// [0,1) from r) and returns dst. If the tree holds no positive priority
// every entry is -1.
func (t *Tree) SampleTo(dst []int, r *rand.Rand) []int {
	var u [chunk]float64
	total := t.Total()
	for off := 0; off < len(dst); off += chunk {
		n := min(len(dst)-off, chunk)
		for b := range u[:n] {
			u[b] = r.Float64() * total
		}
		t.find(dst[off:off+n], u[:n])
	}
	return dst
}

// SampleStratifiedTo draws one leaf per equal-mass segment: entry b of dst
// gets target mass (b+u_b)·Total/len(dst) with u_b uniform in [0,1) from r
// (the stratified sampling of Schaul et al., 2016, Appendix B.2.1). It
// returns dst; entries are -1 if the tree holds no positive priority.
func (t *Tree) SampleStratifiedTo(dst []int, r *rand.Rand) []int {
	var u [chunk]float64
	total := t.Total()
	seg := total / float64(len(dst))
	for off := 0; off < len(dst); off += chunk {
		n := min(len(dst)-off, chunk)
		for b := range u[:n] {
			u[b] = (float64(off+b) + r.Float64()) * seg
		}
		t.find(dst[off:off+n], u[:n])
	}
	return dst
}

// FindTo writes into dst[b] the leaf whose cumulative-priority range
// contains the mass targets[b] (targets in [0, Total()); larger targets
// clamp to the last positive leaf, negative ones to the first) and returns
// dst. It panics if the lengths differ.
func (t *Tree) FindTo(dst []int, targets []float64) []int {
	if len(dst) != len(targets) {
		panic("sumtree: FindTo: len(dst) != len(targets)")
	}
	var u [chunk]float64
	for off := 0; off < len(dst); off += chunk {
		n := min(len(dst)-off, chunk)
		copy(u[:n], targets[off:off+n])
		t.find(dst[off:off+n], u[:n])
	}
	return dst
}

// find runs the len(u) descents level by level, overwriting u.
func (t *Tree) find(dst []int, u []float64) {
	dst = dst[:len(u)]
	for b := range dst {
		dst[b] = 0
	}
	t.descend(dst, u, 1, t.depth-1)
	t.descendLeaves(dst, u)
	leaves := t.leaves
	for b, i := range dst {
		if i >= len(leaves) || leaves[i] <= 0 {
			dst[b] = t.nearestPositive(i)
		}
	}
}

// DescendInner runs the descents of the inner levels only: for each b it
// takes the mass u[b] in [0, Total()) and leaves in groups[b] the node of
// level Depth()-1 whose sibling group of leaves holds the target, and in
// u[b] the mass left to find inside that group. With DescendLeaves it is
// FindTo split at the leaf level, for the two-lock replay buffer. It
// returns groups, resized to len(u).
func (t *Tree) DescendInner(groups []int, u []float64) []int {
	groups = roots(groups, len(u))
	t.descend(groups, u, 1, t.depth-1)
	return groups
}

// roots returns groups resized to n (reallocated if needed) and set to the
// root, where every descent starts.
func roots(groups []int, n int) []int {
	if cap(groups) < n {
		groups = make([]int, n)
	}
	groups = groups[:n]
	clear(groups)
	return groups
}

// DescendLeaves finishes descents started by DescendInner: dst[b] becomes
// the leaf of group groups[b] that holds mass u[b], or -1 when no leaf of
// the group holds it (the leaves were lowered by SetLeaves and the inner
// levels not yet updated by Propagate, or rounding): the caller draws
// again, which is rejection sampling, so accepted draws are exactly
// proportional to the current leaves. It returns dst, resized to
// len(groups).
func (t *Tree) DescendLeaves(dst []int, groups []int, u []float64) []int {
	if len(groups) != len(u) {
		panic("sumtree: DescendLeaves: len(groups) != len(u)")
	}
	if cap(dst) < len(groups) {
		dst = make([]int, len(groups))
	}
	dst = dst[:len(groups)]
	copy(dst, groups)
	t.descendLeaves(dst, u)
	leaves := t.leaves
	for b, i := range dst {
		// Strict: a target that is not inside the chosen leaf's range
		// (past the group's current sum, because leaves were lowered
		// and not yet propagated) is rejected rather than moved, so the
		// accepted draws stay exactly proportional to the leaves.
		if i >= len(leaves) || leaves[i] <= 0 || u[b] >= float64(leaves[i]) {
			dst[b] = -1
		}
	}
	return dst
}

// descend moves every node[b] from inner level from-1 down to inner level
// to, choosing at each level the child whose prefix range contains u[b]
// and subtracting the mass of the siblings before it. The loop over b is
// inside the loop over levels so the B independent group loads of one
// level are in flight together (the batch is the prefetcher).
func (t *Tree) descend(node []int, u []float64, from, to int) {
	for l := from; l <= to; l++ {
		descendLevel(t.k, t.levels[l], node, u)
	}
}

// descendLeaves is descend's last step, from level depth-1 into the
// float32 leaves.
func (t *Tree) descendLeaves(node []int, u []float64) {
	descendLevel(t.k, t.lv, node, u)
}

// descendLevel is one level of descend on the entries lv, for fanout k.
func descendLevel[F leaf](k int, lv []F, node []int, u []float64) {
	switch k {
	case 2:
		descend2(lv, node, u)
	case 4:
		descend4(lv, node, u)
	case 8:
		descend8(lv, node, u)
	case 16:
		descend16(lv, node, u)
	case 32:
		descend32(lv, node, u)
	default:
		descend64(lv, node, u)
	}
}

// b2i compiles to SETcc, keeping the in-group scan free of branches.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// lastPositive is the rare path of a scan whose target is at or past the
// group's sum (rounding, or drift): the last child with positive mass and
// the mass before it (0 and 0 if none is positive).
func lastPositive[F leaf](g []F) (int, float64) {
	for j := len(g) - 1; j > 0; j-- {
		if g[j] > 0 {
			s := 0.0
			for _, v := range g[:j] {
				s += float64(v)
			}
			return j, s
		}
	}
	return 0, 0
}

// nearestPositive is the rare path of a descent that ended on a zero leaf
// (an inner node holding only rounding residue): the first positive leaf
// at or after i, wrapping, or -1 if none.
func (t *Tree) nearestPositive(i int) int {
	n := len(t.leaves)
	if i >= n || i < 0 {
		i = n - 1
	}
	for d := 0; d < n; d++ {
		if j := i - d; j >= 0 && t.leaves[j] > 0 {
			return j
		}
		if j := i + d; j < n && t.leaves[j] > 0 {
			return j
		}
		if i-d < 0 && i+d >= n {
			break
		}
	}
	return -1
}

// Rebuild recomputes every inner node exactly from its children, removing
// the rounding drift accumulated by delta propagation. O(N).
func (t *Tree) Rebuild() {
	t.sums(func(p *float64, s float64) { *p = s })
}

// sums calls f with every inner node and the sum of its children,
// recomputed from the leaves up (so each sum uses the children as f left
// them).
func (t *Tree) sums(f func(node *float64, sum float64)) {
	k := t.k
	for l := t.depth - 1; l >= 0; l-- {
		lv := t.levels[l]
		for i := 0; i < t.counts[l]; i++ {
			s := 0.0
			if l == t.depth-1 {
				for _, v := range t.lv[i*k : i*k+k] {
					s += float64(v)
				}
			} else {
				for _, v := range t.levels[l+1][i*k : i*k+k] {
					s += v
				}
			}
			f(&lv[i], s)
		}
	}
}

// Drift returns the largest difference between an inner node and the sum
// of its children, relative to the total (absolute when the total is
// below 1). O(N).
func (t *Tree) Drift() float64 {
	worst := 0.0
	t.sums(func(p *float64, s float64) { worst = math.Max(worst, math.Abs(*p-s)) })
	return worst / math.Max(1, math.Abs(t.Total()))
}

// Verify returns an error wrapping ErrDrift if Drift exceeds tol.
func (t *Tree) Verify(tol float64) error {
	if d := t.Drift(); !(d <= tol) {
		return fmt.Errorf("%w: relative drift %.3g > %.3g", ErrDrift, d, tol)
	}
	return nil
}

// Reset sets every priority to zero.
func (t *Tree) Reset() {
	for _, lv := range t.levels {
		clear(lv)
	}
	clear(t.lv)
}
