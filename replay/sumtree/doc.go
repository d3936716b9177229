// Package sumtree is a K-ary sum tree: the index structure behind
// prioritized replay (seed 000, Algorithm 2). It maps N slots to
// non-negative priorities and answers, in O(log_K N), "which slot holds
// cumulative mass m?", which turns a uniform draw into a draw proportional
// to priority.
//
// # How it fits
//
// replay.Prioritized keeps one Tree over its ring of transitions (priority
// p_i^α per slot); replay/persist keeps one over slots that it maps to
// store keys, deleting with Set(slot, 0). The tree knows nothing about what
// a slot holds.
//
// # The driving loop
//
//	t, _ := sumtree.New(1<<20, 0)        // 0: DefaultFanout
//	t.SetBatch(idx, prio)                // new or updated priorities
//	t.SampleTo(dst, r)                   // len(dst) draws ∝ priority
//	...
//	if updates > 4*t.Cap() { t.Rebuild() } // drop float rounding drift
//
// # Costs
//
// Set is one add per level (log_K N levels). A search reads one group of K
// siblings per level; groups are contiguous and cache-line aligned, so an
// inner level costs K/8 cache lines and the leaf level K/16 (leaves are
// float32, inner sums float64: half the memory and the leaf-level misses
// of an all-float64 tree, with the float64 tree's rounding; priorities are
// stored rounded to float32, at most MaxPriority). Larger K means fewer
// levels (fewer cache misses) but more work per level; DefaultFanout is
// the measured optimum on the reference machine. Batched calls (SetBatch, SampleTo, FindTo)
// interleave the B operations level by level so their cache misses
// overlap; they allocate nothing.
//
// # Concurrency
//
// A Tree has no lock. Readers may run together; a writer needs exclusive
// access, or one of two protocols. The split protocol of seed 000
// Algorithm 3: SetLeaves under a leaf-level lock, Propagate under an
// inner-level lock, and searches done as DescendInner (inner lock) then
// DescendLeaves (leaf lock). Or shared mode (SetLeaf, PropagateShared,
// DescendInnerShared, LeafInGroup, RebuildShared): inner levels read and
// changed atomically so writers and searchers need no lock around them,
// leaves guarded per group by the caller; see shared.go.
package sumtree
