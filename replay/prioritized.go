package replay

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"

	"herd/internal/scratch"
	"herd/replay/sumtree"
)

// Prioritized is a FIFO ring buffer sampled in proportion to priority
// (Schaul et al., 2016, "Prioritized Experience Replay"), over a K-ary sum
// tree (the PAL paper's, Zhang, Kuppannagari and Prasanna, 2021).
//
// # Sampling and weights
//
// Slot i holds p_i^α in the tree (a float32 leaf: rounded to 24 bits, so
// p^α may not exceed sumtree.MaxPriority) and is drawn with probability
// P(i) = p_i^α / Σ_k p_k^α, exactly for the stored values, which Prob and
// Priority report. New transitions enter at the running maximum
// of all priorities seen (initially 1), so each is likely to be replayed
// at least once. Each sampled transition carries the importance-sampling
// weight
//
//	w_i = (N·P(i))^(−β) / max_j w_j = (min_j P(j) / P(i))^β
//
// with N = Len() and the maximum taken over the sampled batch, so weights
// lie in (0, 1] and only scale the loss down. With Stratified, draw b of n
// targets mass (b+u)·Σp^α/n (one draw per equal-mass segment).
//
// # Slot generations
//
// Every write of a slot gives it a new generation (the write's position /
// Capacity + 1). Sample reports the generation it copied;
// UpdatePriorities applies an update only if the slot still has that
// generation, so a priority computed for an evicted transition never lands
// on its replacement.
//
// # Concurrency (the PAL paper's two locks, finer, without its lazy writing)
//
// Add reserves slots with an atomic fetch-add, then copies each slot's
// data and sets its leaf (the running maximum) together under the slot's
// stripe lock, the lock of a block of max(16, K) slots that guards their
// data, generations and leaves. The leaves' changes then go up the inner
// levels by atomic adds. Sample descends the inner levels with no lock
// (atomic loads), then finishes each draw in its group of leaves and
// copies the slot's data, generation and priority under the group's
// stripe lock, so a priority is never paired with another transition's
// data. (The PAL paper's lazy writing hides a slot by zeroing its
// priority while the data changes outside the locks; holding the stripe
// lock does that job without the extra tree writes.) A draw is rejected and drawn again when a concurrent change
// makes it land outside every leaf of its group, or when an actor holds
// the group's stripe (its slots are in flight; a learner never waits for
// an actor, which may have been preempted inside the stripe), so the
// accepted draws follow the priorities of the slots at rest.
// UpdatePriorities takes each slot's stripe lock to check the generation
// and set the leaf (rows whose stripe is busy last), then propagates the
// same way.
//
// The two locks of the TwoLock variant are thus the stripe locks (leaves
// and data) and treeMu (the inner levels, sharded): writers hold treeMu shared from
// their first leaf write to the end of their propagation, so they never
// wait for each other, and Rebuild and Verify hold it exclusively, so they
// never see a leaf whose change is still on its way up. With Locking
// GlobalLock, one mutex is held across each whole operation instead (the
// baseline), with plain tree operations.
//
// Cost per batch of n: Add O(n·(transition + log_K N)), Sample
// O(n·(K·log_K N + transition)), UpdatePriorities O(n·log_K N), plus one
// O(N) tree rebuild every RebuildEvery priority changes. Nothing is
// allocated in steady state.
type Prioritized struct {
	// Read-mostly, read by every operation: kept off the cache lines of
	// the locks and counters below, which other cores write all the time
	// (on this 2-core machine a shared line cost more than the work).
	cfg     Config
	st      *storage
	twoLock bool
	tree    *sumtree.Tree // leaves guarded by the storage stripes
	maxRaw  float64       // largest priority x with x^α ≤ sumtree.MaxPriority
	beta    atomic.Uint64 // math.Float64bits(β)
	pool    sync.Pool     // *callScratch

	_      cacheLinePad
	global sync.Mutex // GlobalLock only: held across each operation

	// treeMu (TwoLock only) is shared by writers and exclusive for Rebuild
	// and Verify. It is sharded: a writer read-locks the shard its pooled
	// scratch names, and scratches live in per-processor pools, so writers
	// on different cores rarely touch the same lock word; the exclusive
	// side locks every shard.
	treeMu [treeShards]paddedRW

	_ cacheLinePad
	// maxP is the running maximum of raw priorities, as float64 bits
	// (non-negative floats order like their bits, so a CAS loop on the
	// bits keeps the maximum).
	maxP atomic.Uint64

	_            cacheLinePad
	sinceRebuild atomic.Int64 // priority writes since the last Rebuild
	_            cacheLinePad
}

// treeShards is the number of treeMu shards.
const treeShards = 8

// callScratch holds one call's temporaries, pooled so calls do not allocate.
type callScratch struct {
	shard  int // the treeMu shard this scratch's writer read-locks
	idx    []int
	gen    []uint64
	prio   []float64
	delta  []float64
	groups []int
	u      []float64
}

// NewPrioritized returns an empty prioritized buffer.
func NewPrioritized(cfg Config) (*Prioritized, error) {
	cfg = cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	t, err := sumtree.New(cfg.Capacity, cfg.Fanout)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	p := &Prioritized{
		cfg:     cfg,
		st:      newStorage(cfg, t.Fanout()),
		twoLock: cfg.Locking == TwoLock,
		tree:    t,
		maxRaw:  math.Pow(sumtree.MaxPriority, 1/cfg.Alpha),
	}
	p.maxP.Store(math.Float64bits(1))
	p.beta.Store(math.Float64bits(cfg.Beta))
	var shards atomic.Int64
	p.pool.New = func() any { return &callScratch{shard: int(shards.Add(1)) % treeShards} }
	return p, nil
}

// Config returns the resolved configuration (Beta as given at creation).
func (p *Prioritized) Config() Config { return p.cfg }

// Len returns the number of transitions held.
func (p *Prioritized) Len() int { return p.st.Len() }

// Cap returns the capacity.
func (p *Prioritized) Cap() int { return p.cfg.Capacity }

// Beta returns the current importance-sampling exponent.
func (p *Prioritized) Beta() float64 { return math.Float64frombits(p.beta.Load()) }

// SetBeta changes β (annealed towards 1 during training); safe to call
// while other goroutines sample.
func (p *Prioritized) SetBeta(beta float64) error {
	if !(beta >= 0 && beta <= 1) {
		return fmt.Errorf("%w: %v not in [0, 1]", ErrBeta, beta)
	}
	p.beta.Store(math.Float64bits(beta))
	return nil
}

func (p *Prioritized) getScratch(n int) *callScratch {
	sc := p.pool.Get().(*callScratch)
	sc.idx = scratch.Resize(sc.idx, n)
	sc.gen = scratch.Resize(sc.gen, n)
	sc.prio = scratch.Resize(sc.prio, n)
	return sc
}

// pow returns x^α (x ≥ 0), with the common exponents special-cased.
func (p *Prioritized) pow(x float64) float64 {
	switch p.cfg.Alpha {
	case 1:
		return x
	case 0.5:
		return math.Sqrt(x)
	}
	return powPos(x, p.cfg.Alpha)
}

// powPos is x^y for x ≥ 0 and finite y as exp(y·ln x): about twice as fast
// as math.Pow, which handles every special case, and within a few ulps
// (math.Pow took a quarter of a 128-row Sample in the profile).
func powPos(x, y float64) float64 { return math.Exp(y * math.Log(x)) }

// checkPriorities rejects a priority that is NaN, negative, infinite or
// above maxRaw, whose power the sum tree could not hold (its leaves are
// float32: p^α ≤ sumtree.MaxPriority).
func (p *Prioritized) checkPriorities(prio []float64) error {
	for i, x := range prio {
		if !(x >= 0) || math.IsInf(x, 1) {
			return fmt.Errorf("%w: priorities[%d] = %v", ErrPriority, i, x)
		}
		if x > p.maxRaw {
			return fmt.Errorf("%w: priorities[%d] = %v: to the power α = %v it exceeds %g, the largest the sum tree holds",
				ErrPriority, i, x, p.cfg.Alpha, float64(sumtree.MaxPriority))
		}
	}
	return nil
}

// Add copies b into the buffer at the running maximum priority, evicting
// the oldest transitions when full.
func (p *Prioritized) Add(b *Batch) error { return p.add(b, nil) }

// AddWithPriorities is Add with explicit initial priorities (for example
// computed by an actor, as in Ape-X), one per transition.
func (p *Prioritized) AddWithPriorities(b *Batch, priorities []float64) error {
	if b != nil && len(priorities) != b.Len() {
		return fmt.Errorf("%w: %d priorities for %d transitions", ErrShape, len(priorities), b.Len())
	}
	if err := p.checkPriorities(priorities); err != nil {
		return err
	}
	return p.add(b, priorities)
}

func (p *Prioritized) add(b *Batch, prio []float64) error {
	if err := p.st.checkAdd(b); err != nil {
		return err
	}
	n := b.Len()
	if n == 0 {
		return nil
	}
	sc := p.getScratch(n)
	defer p.pool.Put(sc)
	if p.twoLock {
		p.treeMu[sc.shard].RLock()
		defer p.treeMu[sc.shard].RUnlock()
	} else {
		p.global.Lock()
		defer p.global.Unlock()
	}
	for _, x := range prio {
		p.raiseMax(x)
	}
	pm := p.pow(p.maxPriority())
	for k := range sc.prio {
		if prio != nil {
			sc.prio[k] = p.pow(prio[k])
		} else {
			sc.prio[k] = pm
		}
	}
	// Copy and set the leaves slot by slot under the stripe locks (see
	// the type's doc); a slot that a writer a lap ahead already took is
	// skipped by write and left alone.
	sc.delta = scratch.Resize(sc.delta, n)
	m := 0
	p.st.write(b, p.st.reserve(n), func(k, slot int) {
		sc.idx[m], sc.delta[m] = slot, p.tree.SetLeaf(slot, sc.prio[k])
		m++
	})
	p.propagate(sc.idx[:m], sc.delta[:m], sc.shard)
	return nil
}

// propagate applies leaf deltas to the inner levels, skipping the work
// (and the rebuild count) when no leaf changed — common when a full
// buffer is refilled at an unchanged maximum — and rebuilds the tree when
// RebuildEvery changed leaves have accumulated. The caller holds
// treeMu[shard] shared (TwoLock) or the global lock.
func (p *Prioritized) propagate(idx []int, delta []float64, shard int) {
	changed := 0
	for _, d := range delta {
		if d != 0 {
			changed++
		}
	}
	if changed == 0 {
		return
	}
	if p.twoLock {
		p.tree.PropagateShared(idx, delta)
	} else {
		p.tree.Propagate(idx, delta)
	}
	every := int64(p.cfg.RebuildEvery)
	if every <= 0 || p.sinceRebuild.Add(int64(changed)) < every {
		return
	}
	if !p.twoLock {
		p.tree.Rebuild()
		p.sinceRebuild.Store(0)
		return
	}
	// Swap the count so that one writer rebuilds; it trades its shared
	// hold for an exclusive one, which waits for every writer whose leaf
	// changes are still on their way up.
	if p.sinceRebuild.Swap(0) < every {
		return
	}
	p.treeMu[shard].RUnlock()
	p.lockTree()
	p.tree.RebuildShared()
	p.unlockTree()
	p.treeMu[shard].RLock()
}

// lockTree takes every treeMu shard exclusively, in order (TwoLock).
func (p *Prioritized) lockTree() {
	for i := range p.treeMu {
		p.treeMu[i].Lock()
	}
}

func (p *Prioritized) unlockTree() {
	for i := range p.treeMu {
		p.treeMu[i].Unlock()
	}
}

// lockAll takes the buffer-wide lock: every treeMu shard under TwoLock,
// else the global lock.
func (p *Prioritized) lockAll() {
	if p.twoLock {
		p.lockTree()
		return
	}
	p.global.Lock()
}

func (p *Prioritized) unlockAll() {
	if p.twoLock {
		p.unlockTree()
		return
	}
	p.global.Unlock()
}

// raiseMax raises the running maximum raw priority to x.
func (p *Prioritized) raiseMax(x float64) {
	nb := math.Float64bits(x)
	for {
		old := p.maxP.Load()
		if nb <= old || p.maxP.CompareAndSwap(old, nb) {
			return
		}
	}
}

func (p *Prioritized) maxPriority() float64 { return math.Float64frombits(p.maxP.Load()) }

// Sample draws n transitions in proportion to priority^α into dst, with
// slots, generations, probabilities and importance weights (see the type's
// doc). r must belong to the calling goroutine.
func (p *Prioritized) Sample(dst *Sample, n int, r *rand.Rand) error {
	if !p.twoLock {
		p.global.Lock()
		defer p.global.Unlock()
	}
	size := p.st.Len()
	if size == 0 {
		return ErrEmpty
	}
	if n < 1 || n > size {
		return fmt.Errorf("%w: sampling %d from %d", ErrTooMany, n, size)
	}
	sc := p.getScratch(n)
	defer p.pool.Put(sc)
	sc.u = scratch.Resize(sc.u, n)

	total := p.total()
	if !(total > 0) {
		return fmt.Errorf("%w: total priority is %v", ErrEmpty, total)
	}
	if p.cfg.Stratified {
		seg := total / float64(n)
		for b := range sc.u {
			sc.u[b] = (float64(b) + r.Float64()) * seg
		}
	} else {
		for b := range sc.u {
			sc.u[b] = r.Float64() * total
		}
	}
	sc.groups = p.descendInner(sc.groups, sc.u)

	// Finish each descent in its group of leaves and copy the slot's data,
	// generation and priority, all under the group's stripe lock, so they
	// belong to one transition. A draw is drawn again, independently, when
	// it lands outside every leaf of its group (a concurrent change not
	// yet propagated, or rounding), or in a group an actor is writing
	// (the PAL paper's lazy writing hides slots in flight by zeroing their priorities; here
	// the stripe lock shows them), so the accepted draws follow the
	// priorities of the slots at rest. A learner never waits for an
	// actor, which matters when there are more goroutines than cores: an
	// actor preempted inside a stripe keeps it for a whole scheduling
	// slice.
	dst.resize(n, p.cfg.ObsSize, p.cfg.ActSize)
	for b := range sc.groups {
		g, u := sc.groups[b], sc.u[b]
		for try, busy := 0, 0; ; {
			i, gen, pr := p.st.readLeaf(dst, b, g, u, p.tree, busy >= maxBusy)
			if i >= 0 {
				dst.Index[b], dst.Gen[b], sc.prio[b] = i, gen, pr
				break
			}
			if i == -2 {
				busy++ // after maxBusy, wait (a tiny buffer may be all in flight)
			} else if try++; try == 100 {
				return fmt.Errorf("%w: no positive priority found", ErrEmpty)
			}
			g, u, total = p.drawOne(r)
		}
	}
	minP := math.Inf(1)
	for b := range n {
		pr := sc.prio[b] / total
		dst.Prob[b] = pr
		minP = min(minP, pr)
	}
	beta := p.Beta()
	for b, pr := range dst.Prob {
		switch beta {
		case 0:
			dst.Weight[b] = 1
		case 1:
			dst.Weight[b] = float32(minP / pr)
		default:
			dst.Weight[b] = float32(powPos(minP/pr, beta))
		}
	}
	return nil
}

// maxBusy is how many draws in a row Sample rejects because they landed
// in a stripe being written before it waits for the stripe instead.
const maxBusy = 8

// total and descendInner read the tree in the variant's mode: atomic
// (TwoLock, no lock held) or plain (under the global lock).
func (p *Prioritized) total() float64 {
	if p.twoLock {
		return p.tree.LoadTotal()
	}
	return p.tree.Total()
}

func (p *Prioritized) descendInner(groups []int, u []float64) []int {
	if p.twoLock {
		return p.tree.DescendInnerShared(groups, u)
	}
	return p.tree.DescendInner(groups, u)
}

// drawOne is the slow path of Sample: one independent descent of the inner
// levels (the group and the mass left in it) and the total it started from.
func (p *Prioritized) drawOne(r *rand.Rand) (int, float64, float64) {
	var u [1]float64
	var g [1]int
	total := p.total()
	u[0] = r.Float64() * total
	p.descendInner(g[:], u[:])
	return g[0], u[0], total
}

// UpdatePriorities sets the priority of slot idx[k] to priorities[k] (the
// tree stores priorities[k]^α) if the slot still holds generation gen[k],
// as reported by Sample; updates of overwritten slots are skipped. It
// returns how many were applied. Invalid input is rejected as a whole
// before anything changes.
func (p *Prioritized) UpdatePriorities(idx []int, gen []uint64, priorities []float64) (int, error) {
	if len(idx) != len(gen) || len(idx) != len(priorities) {
		return 0, fmt.Errorf("%w: len idx %d, gen %d, priorities %d", ErrIndex, len(idx), len(gen), len(priorities))
	}
	for k, i := range idx {
		if i < 0 || i >= p.cfg.Capacity {
			return 0, fmt.Errorf("%w: idx[%d] = %d not in [0, %d)", ErrIndex, k, i, p.cfg.Capacity)
		}
	}
	if err := p.checkPriorities(priorities); err != nil {
		return 0, err
	}
	if len(idx) == 0 {
		return 0, nil
	}
	sc := p.getScratch(len(idx))
	defer p.pool.Put(sc)
	// Powers outside any lock.
	for k, x := range priorities {
		sc.prio[k] = p.pow(x)
	}
	sc.delta = scratch.Resize(sc.delta, len(idx))
	m := 0
	apply := func(k int) {
		i := idx[k]
		if p.st.gen[i] == gen[k] {
			sc.idx[m] = i
			sc.delta[m] = p.tree.SetLeaf(i, sc.prio[k])
			m++
			p.raiseMax(priorities[k])
		}
	}
	if !p.twoLock {
		p.global.Lock()
		defer p.global.Unlock()
		for k := range idx {
			if gen[k] != 0 {
				apply(k)
			}
		}
		p.propagate(sc.idx[:m], sc.delta[:m], 0)
		return m, nil
	}
	p.treeMu[sc.shard].RLock()
	defer p.treeMu[sc.shard].RUnlock()
	// Slots whose stripe an actor holds are left for a second pass, so
	// that the learner waits only at the end, if at all.
	later := 0
	for k, i := range idx {
		if gen[k] == 0 {
			continue
		}
		mu := p.st.stripe(i)
		if !mu.TryLock() {
			sc.gen[later] = uint64(k) // scratch: the rows left for later
			later++
			continue
		}
		apply(k)
		mu.Unlock()
	}
	for _, k := range sc.gen[:later] {
		mu := p.st.stripe(idx[k])
		mu.lockSpin()
		apply(int(k))
		mu.Unlock()
	}
	p.propagate(sc.idx[:m], sc.delta[:m], sc.shard)
	return m, nil
}

// Priority returns the stored value p_i^α of slot i and the generation of
// the transition it holds (for tests and diagnostics).
func (p *Prioritized) Priority(i int) (float64, uint64, error) {
	if i < 0 || i >= p.cfg.Capacity {
		return 0, 0, fmt.Errorf("%w: %d not in [0, %d)", ErrIndex, i, p.cfg.Capacity)
	}
	if !p.twoLock {
		p.global.Lock()
		defer p.global.Unlock()
	}
	mu := p.st.stripe(i)
	mu.RLock()
	defer mu.RUnlock()
	return p.tree.Get(i), p.st.gen[i], nil
}

// Verify checks the buffer's invariants and returns the first violation:
// the tree's inner nodes match their children within tol (relative), and
// every slot with a positive priority holds a transition. Meant for tests;
// it excludes every writer for O(N).
func (p *Prioritized) Verify(tol float64) error {
	p.lockAll()
	defer p.unlockAll()
	if err := p.tree.Verify(tol); err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	for i := 0; i < p.cfg.Capacity; i++ {
		if p.tree.Get(i) <= 0 {
			continue
		}
		mu := p.st.stripe(i)
		mu.RLock()
		g := p.st.gen[i]
		mu.RUnlock()
		if g == 0 {
			return fmt.Errorf("replay: slot %d has priority %v but holds no transition", i, p.tree.Get(i))
		}
	}
	return nil
}
