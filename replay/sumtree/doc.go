// Package sumtree is a K-ary sum tree: the index structure behind
// prioritized replay (Zhang, Kuppannagari and Prasanna 2021, "Parallel Actors
// and Learners" (PAL), Algorithm 2). It maps N slots to
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
// the fastest fanout in `herd bench replay` on the reference machine
// (docs/BENCHMARKS.md). Batched calls (SetBatch, SampleTo, FindTo)
// interleave the B operations level by level so their cache misses
// overlap; they allocate nothing.
//
// # Concurrency
//
// A Tree has no lock. Readers may run together; a writer needs exclusive
// access, or one of two protocols. The split protocol of PAL
// Algorithm 3: SetLeaves under a leaf-level lock, Propagate under an
// inner-level lock, and searches done as DescendInner (inner lock) then
// DescendLeaves (leaf lock). Or shared mode (SetLeaf, PropagateShared,
// DescendInnerShared, LeafInGroup, RebuildShared): inner levels read and
// changed atomically so writers and searchers need no lock around them,
// leaves guarded per group by the caller; see shared.go.
//
// # Design notes
//
//   - Layout. Inner levels in one `[]float64`, the leaves in a `[]float32`. Level 0
//     is the root, level D = ⌈log_K N⌉ holds the leaves. Node i of level l has its children at
//     i·K … i·K+K−1 of level l+1. Each level starts on a 64-byte boundary (the backing slices
//     are allocated with a line of slack and offset to alignment) and is padded with zeros to a
//     multiple of K, so every sibling group is contiguous and aligned: an inner group is one
//     cache line for K ≤ 8, K/8 adjacent lines above; a leaf group one line for K ≤ 16. The
//     leaves are one contiguous slice indexed by slot, which is what `replay/persist` maps its
//     keys to.
//   - float32 leaves under float64 sums. The leaves are most of the memory
//     (7/8 of an all-float64 tree at K = 8) and of the cache misses; float32 halves them and makes a
//     K = 16 leaf group one line instead of two. Inner nodes stay float64, and every sum,
//     the in-group scan of a leaf group included, is float64 arithmetic on exactly widened
//     leaves, so the searches round exactly as the all-float64 tree did; the safety argument
//     below does not depend on the precision at all. What changes is what a leaf stores:
//     `Set` rounds p to float32 (relative error ≤ 2⁻²⁴; below 2⁻¹²⁶ fewer bits; below 2⁻¹⁵⁰
//     zero, a slot then never drawn) and p may not exceed `sumtree.MaxPriority` (3.4e38):
//     `replay` rejects p with p^α above it (`ErrPriority`), `replay/persist` rejects such
//     priorities and keeps its time-decay weights below e^80. `Get`, `Total`, `Prob` and the
//     draws all use the stored value, so sampling is exactly proportional to what `Get`
//     returns. PAL's C++ tree (float32 sums too) lost draws to rounding (28 out-of-range
//     indices in 44M draws at K = 8); herd's float32 leaves gave none
//     (`TestNeverZeroOrOutsideWide`, `herd bench replay --safety --decades 83`). Measured
//     gains: docs/BENCHMARKS.md.
//   - float64 sums, delta propagation. `Set` adds (new − old stored value) to each ancestor: one add per
//     level instead of re-summing K children per level (≈K× more adds per set). Delta propagation accumulates rounding error, so
//     the tree offers `Drift` (max |node − Σ children| relative to the total), `Verify(tol)`
//     and `Rebuild` (exact recomputation, O(N)). `replay.Prioritized` rebuilds every
//     `RebuildEvery` writes (default 8·capacity, so < 1 ns amortised per write).
//   - Batched set (`SetBatch`): leaf writes for the whole chunk first (their cache misses
//     overlap), then one pass per inner level; the root's deltas are summed in four register
//     accumulators, so the shared top of the tree is written once per chunk. No sort is needed
//     because delta propagation commutes, and repeated indices are handled in order.
//   - Batched, interleaved search (`SampleTo`, `SampleStratifiedTo`, `FindTo`): the B
//     descents run level by level (loop over the batch inside the loop over levels) so up to B
//     independent group loads are in flight together; the batch is the prefetcher (Go has no
//     prefetch intrinsic). The in-group scan is hierarchical and branch-free: block sums
//     (quads; blocks of 16 for K ≥ 32) are independent adds, the block is picked by counting
//     prefix sums ≤ target (compiled to SETcc), then the child inside the block. There is a
//     hand-specialised descent per K ∈ {2,4,8,16,32,64} (fixed-size array pointers remove
//     bounds checks).
//   - Numerical safety. A descent can go wrong only through rounding: a target at or past
//     a group's sum would pick a zero child (possibly padding past the capacity — exactly
//     the failure of PAL's float32 C++ tree). A rarely taken branch replaces a zero child
//     by the last positive child of the group; a descent that still ends on a zero leaf (an
//     inner node holding only rounding residue) falls back to the nearest positive leaf. So a
//     search never returns an index ≥ the number of filled slots or a zero-priority slot; only
//     a tree with no positive leaf gives −1.
//   - Two-lock support. `SetLeaves`/`Propagate` and `DescendInner`/`DescendLeaves` split
//     writes and searches at the leaf level (PAL, Algorithm 3). Shared mode
//     (`shared.go`) lets writers and searchers run with no lock around the inner levels:
//     inner nodes are read with atomic loads (plain loads on amd64/arm64, so `descendShared8`
//     costs what `descend8` does) and changed by compare-and-swap adds (`PropagateShared`);
//     leaves are plain and guarded per group by the caller (`SetLeaf`, `LeafInGroup`). A CAS
//     costs more than an add and every writer's adds meet at the top, so `PropagateShared`
//     merges deltas before adding: runs of adjacent entries at the deep levels, a dense
//     per-parent sum at levels of ≤ 512 nodes (a learner's 128 random leaves then cost one
//     CAS per distinct ancestor, 9 at the two top levels instead of 129; without it two
//     learners did not scale at all). `RebuildShared` stores atomically, so searches may run
//     during it; writers may not. The tree itself still has no lock.
//   - Default K = 8 from the K sweeps in `replay.bench.md`: lowest tree_set + tree_sample
//     at 1M and 10M slots in every run. K = 16 sets faster (fewer levels) but its in-group
//     scan costs more than the level it saves on sample; K ≥ 32 lose on sample; K ≤ 4 lose
//     on set (more levels, more misses).
package sumtree
