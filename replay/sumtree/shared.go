package sumtree

import (
	"math"
	"sync/atomic"
	"unsafe"
)

// Shared mode: the operations below let several goroutines propagate at
// once while others search the inner levels, with no lock around them
// (replay's two-lock buffer). Inner nodes are read with atomic loads and
// changed with atomic compare-and-swap adds. Leaves are not atomic: the
// caller guards each group of K sibling leaves with a lock of its own
// (SetLeaf to write one, LeafInGroup to finish a search in one). While
// writers propagate, a search may see a parent that does not yet include a
// child's change: it then lands past a group's sum or outside every leaf
// of the group, and LeafInGroup rejects the draw for the caller to draw
// again.
//
// Everything that touches the inner levels concurrently must use only these
// methods; RebuildShared must not overlap PropagateShared or leaf writes
// (the caller excludes them), though searches may run during it. On amd64
// and arm64 an atomic load is a plain load, so searches cost what the
// plain ones do; a compare-and-swap costs more than a plain add, so
// PropagateShared merges the deltas of consecutive entries that share an
// ancestor before adding.

func loadF(p *float64) float64 {
	return math.Float64frombits(atomic.LoadUint64((*uint64)(unsafe.Pointer(p))))
}

func storeF(p *float64, v float64) {
	atomic.StoreUint64((*uint64)(unsafe.Pointer(p)), math.Float64bits(v))
}

func addF(p *float64, d float64) {
	u := (*uint64)(unsafe.Pointer(p))
	for {
		old := atomic.LoadUint64(u)
		if atomic.CompareAndSwapUint64(u, old, math.Float64bits(math.Float64frombits(old)+d)) {
			return
		}
	}
}

// LoadTotal is Total for shared mode.
func (t *Tree) LoadTotal() float64 { return loadF(&t.levels[0][0]) }

// SetLeaf sets leaf i to p and returns the change, to be passed to
// PropagateShared. The caller holds the lock of i's group.
func (t *Tree) SetLeaf(i int, p float64) float64 { return t.setLeaf(i, p) }

// GroupStart is the first leaf of group g (a node of level Depth()-1, as
// DescendInnerShared returns); its K leaves are GroupStart(g) … +K-1.
func (t *Tree) GroupStart(g int) int { return g << (t.shift & 63) }

// LeafInGroup finishes a search in group g: the leaf whose range holds
// mass u, or -1 when none does (u at or past the group's sum, or inside a
// zero leaf). The caller holds the lock of the group.
func (t *Tree) LeafInGroup(g int, u float64) int {
	base := g << (t.shift & 63)
	end := min(base+t.k, len(t.leaves))
	for i := base; i < end; i++ {
		v := float64(t.leaves[i])
		if u < v {
			return i
		}
		u -= v
	}
	return -1
}

// PropagateShared adds deltas[b] to every inner ancestor of leaf idx[b],
// atomically, so that several goroutines may propagate at once. Deltas
// that reach the same ancestor are summed first (runs of adjacent entries
// at the deep levels, all of them at levels of at most denseLevel nodes),
// so each distinct ancestor costs one compare-and-swap.
func (t *Tree) PropagateShared(idx []int, deltas []float64) {
	if len(idx) != len(deltas) {
		panic("sumtree: PropagateShared: len(idx) != len(deltas)")
	}
	var node [chunk]int
	var d [chunk]float64
	for len(idx) > 0 {
		n := min(len(idx), chunk)
		copy(node[:n], idx[:n])
		copy(d[:n], deltas[:n])
		t.propagateShared(node[:n], d[:n])
		idx, deltas = idx[n:], deltas[n:]
	}
}

// denseLevel is the largest level (in nodes) whose deltas propagateShared
// sums in a dense local array before adding: the top levels, where
// entries in random order (a learner's update) share ancestors without
// being adjacent, and where every goroutine's adds meet.
const denseLevel = 512

// propagateShared merges and adds level by level; node and d are scratch.
func (t *Tree) propagateShared(node []int, d []float64) {
	var acc [denseLevel]float64
	var seen [denseLevel]bool
	m := len(node)
	for l := t.depth - 1; l >= 0 && m > 0; l-- {
		lv := t.levels[l]
		w := 0
		if t.counts[l] <= denseLevel {
			// Sum per parent; the parents keep their first-seen order.
			for b := 0; b < m; b++ {
				j := node[b] >> (t.shift & 63)
				if !seen[j] {
					seen[j] = true
					node[w] = j
					w++
				}
				acc[j] += d[b]
			}
			for b := 0; b < w; b++ {
				j := node[b]
				d[b] = acc[j]
				acc[j], seen[j] = 0, false
			}
		} else {
			// Merge runs of equal parents in place (adjacent leaves).
			for b := 0; b < m; b++ {
				j := node[b] >> (t.shift & 63)
				if w > 0 && node[w-1] == j {
					d[w-1] += d[b]
					continue
				}
				node[w], d[w] = j, d[b]
				w++
			}
		}
		for b := 0; b < w; b++ {
			if d[b] != 0 {
				addF(&lv[node[b]], d[b])
			}
		}
		m = w
	}
}

// DescendInnerShared is DescendInner for shared mode.
func (t *Tree) DescendInnerShared(groups []int, u []float64) []int {
	groups = roots(groups, len(u))
	t.descendShared(groups, u, 1, t.depth-1)
	return groups
}

// descendShared is descend with every node read once by an atomic load
// into a local copy of its group, then scanned as descend scans: the
// hierarchical branch-free scan for the default fanout, a linear one
// otherwise.
func (t *Tree) descendShared(node []int, u []float64, from, to int) {
	if t.k == 8 {
		descendShared8(t, node, u, from, to)
		return
	}
	k := t.k
	var g [64]float64
	for l := from; l <= to; l++ {
		lv := t.levels[l]
		for b, i := range node {
			base := i << (t.shift & 63)
			grp := lv[base : base+k]
			for c := range grp {
				g[c] = loadF(&grp[c])
			}
			x := u[b]
			j, before := 0, 0.0
			for j < k-1 && before+g[j] <= x {
				before += g[j]
				j++
			}
			if g[j] <= 0 {
				j, before = lastPositive(g[:k])
			}
			node[b] = base + j
			u[b] = x - before
		}
	}
}

// descendShared8 is descend8 on atomically loaded groups.
func descendShared8(t *Tree, node []int, u []float64, from, to int) {
	u = u[:len(node)]
	for l := from; l <= to; l++ {
		lv := t.levels[l]
		for b, i := range node {
			base := i << 3
			p := (*[8]float64)(lv[base : base+8])
			var g [8]float64
			for c := range g {
				g[c] = loadF(&p[c])
			}
			j, before := scan8(&g, u[b])
			node[b] = base + j
			u[b] -= before
		}
	}
}

// RebuildShared is Rebuild for shared mode: searches may run meanwhile
// (each node changes by one atomic store), writers may not.
func (t *Tree) RebuildShared() { t.sums(storeF) }
