package replay

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"

	"herd/replay/sumtree"
)

// Prioritized is a FIFO ring buffer sampled in proportion to priority
// (Schaul et al., 2016, "Prioritized Experience Replay"), over a K-ary sum
// tree (seed 000).
//
// # Sampling and weights
//
// Slot i holds p_i^α in the tree and is drawn with probability
// P(i) = p_i^α / Σ_k p_k^α. New transitions enter at the running maximum
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
// # Concurrency (seed 000 §IV-D, Algorithm 3)
//
// Add reserves slots with an atomic fetch-add, then writes lazily: (1)
// copy the data under the slots' stripe locks only, (2) set the leaves to
// the running maximum and propagate the change to the inner levels. Until
// step 2 the leaves still hold the evicted transitions' priorities; a
// learner that draws such a slot reads data of a newer generation than the
// priority it drew and rejects the draw, drawing again, so accepted draws
// always pair a priority with the data it was set for (the seed hides the
// slots first by zeroing their priorities; the generation check does the
// same job with one lock round trip fewer per insert). Priorities are
// guarded by two locks: leafMu for the leaf level (priorities and slot
// generations) and treeMu for the inner levels; a priority write holds
// leafMu while writing leaves, then treeMu while propagating the deltas,
// and a search holds treeMu for the inner descent, then leafMu for the
// last level, so leaf reads and inner-level updates overlap. A draw that
// lands on inner mass whose leaves were lowered but not yet propagated is
// rejected and drawn again too. Lock order when both are held (only during
// Rebuild): treeMu, then leafMu. With Locking GlobalLock, one mutex is
// held across each whole operation instead (the baseline).
//
// Cost per batch of n: Add O(n·(transition + log_K N)), Sample
// O(n·(K·log_K N + transition)), UpdatePriorities O(n·log_K N), plus one
// O(N) tree rebuild every RebuildEvery priority writes. Nothing is
// allocated in steady state.
type Prioritized struct {
	// Read-mostly, read by every operation: kept off the cache lines of
	// the locks and counters below, which other cores write all the time
	// (on this 2-core machine a shared line cost more than the work).
	cfg     Config
	st      *storage
	twoLock bool
	tree    *sumtree.Tree // leaves guarded by leafMu, inner levels by treeMu
	pgen    []uint64      // elements guarded by leafMu: generation whose priority the leaf holds
	beta    atomic.Uint64 // math.Float64bits(β)
	pool    sync.Pool     // *scratch

	_      cacheLinePad
	global sync.Mutex // GlobalLock only: held across each operation

	_      cacheLinePad
	leafMu sync.RWMutex
	maxP   float64 // guarded by leafMu: running max of raw priorities

	_            cacheLinePad
	treeMu       sync.RWMutex
	sinceRebuild int // guarded by treeMu

	_ cacheLinePad
	// pending counts writes between SetLeaves and Propagate. It rises
	// under leafMu and falls under treeMu, so it is stable while both are
	// held; Rebuild runs only when it is 0, or it would count those
	// writes' deltas twice (once from the leaves, once when propagated).
	pending atomic.Int64
	_       cacheLinePad
}

// scratch holds one call's temporaries, pooled so calls do not allocate.
type scratch struct {
	idx    []int
	gen    []uint64
	prio   []float64
	delta  []float64
	groups []int
	u      []float64
	leaf   []int
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
		st:      newStorage(cfg.Capacity, cfg.ObsSize, cfg.ActSize),
		twoLock: cfg.Locking == TwoLock,
		pgen:    make([]uint64, cfg.Capacity),
		maxP:    1,
		tree:    t,
	}
	p.beta.Store(math.Float64bits(cfg.Beta))
	p.pool.New = func() any { return new(scratch) }
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

func (p *Prioritized) getScratch(n int) *scratch {
	sc := p.pool.Get().(*scratch)
	sc.idx = resize(sc.idx, n)
	sc.gen = resize(sc.gen, n)
	sc.prio = resize(sc.prio, n)
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

func checkPriorities(prio []float64) error {
	for i, x := range prio {
		if !(x >= 0) || math.IsInf(x, 1) {
			return fmt.Errorf("%w: priorities[%d] = %v", ErrPriority, i, x)
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
	if err := checkPriorities(priorities); err != nil {
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
	if !p.twoLock {
		p.global.Lock()
		defer p.global.Unlock()
	}
	sc := p.getScratch(n)
	defer p.pool.Put(sc)
	start := p.st.reserve(n)
	for k := range sc.idx {
		sc.idx[k], sc.gen[k] = p.st.slotGen(start + uint64(k))
	}
	// (1) Copy under the slots' stripe locks only. The leaves still hold
	// the evicted transitions' priorities meanwhile; a learner that draws
	// such a slot finds data of a newer generation than the priority it
	// drew and draws again (see Sample), so the slots need not be hidden
	// first — which saves a leaf-lock round trip per insert.
	p.st.write(b, start)

	// (2) Publish at the running maximum (or the given priorities).
	p.lockLeaf()
	for _, x := range prio {
		p.maxP = max(p.maxP, x)
	}
	pm := p.pow(p.maxP)
	for k, i := range sc.idx {
		switch {
		case p.pgen[i] > sc.gen[k]:
			// A writer a lap ahead owns the slot (see storage.write):
			// leave it alone.
			sc.prio[k] = p.tree.Get(i)
			continue
		case prio != nil:
			sc.prio[k] = p.pow(prio[k])
		default:
			sc.prio[k] = pm
		}
		p.pgen[i] = sc.gen[k]
	}
	sc.delta = p.tree.SetLeaves(sc.delta, sc.idx, sc.prio)
	p.pending.Add(1)
	p.unlockLeaf()
	p.propagate(sc.idx, sc.delta)
	return nil
}

func (p *Prioritized) lockLeaf() {
	if p.twoLock {
		p.leafMu.Lock()
	}
}

func (p *Prioritized) unlockLeaf() {
	if p.twoLock {
		p.leafMu.Unlock()
	}
}

// propagate applies leaf deltas written by the caller's SetLeaves to the
// inner levels under treeMu, and rebuilds the tree when RebuildEvery writes
// have accumulated and no other write is half done.
func (p *Prioritized) propagate(idx []int, delta []float64) {
	nonzero := false
	for _, d := range delta {
		if d != 0 {
			nonzero = true
			break
		}
	}
	if !nonzero {
		p.pending.Add(-1)
		return
	}
	if p.twoLock {
		p.treeMu.Lock()
		defer p.treeMu.Unlock()
	}
	p.tree.Propagate(idx, delta)
	p.pending.Add(-1)
	p.sinceRebuild += len(idx)
	if p.cfg.RebuildEvery > 0 && p.sinceRebuild >= p.cfg.RebuildEvery {
		if p.twoLock {
			p.leafMu.RLock()
			defer p.leafMu.RUnlock()
		}
		if p.pending.Load() == 0 {
			p.tree.Rebuild()
			p.sinceRebuild = 0
		}
	}
}

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
	sc.u = resize(sc.u, n)

	// Inner levels under treeMu.
	if p.twoLock {
		p.treeMu.RLock()
	}
	total := p.tree.Total()
	if !(total > 0) {
		if p.twoLock {
			p.treeMu.RUnlock()
		}
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
	sc.groups = p.tree.DescendInner(sc.groups, sc.u)
	if p.twoLock {
		p.treeMu.RUnlock()
	}

	// Leaf level under leafMu.
	if p.twoLock {
		p.leafMu.RLock()
	}
	sc.leaf = p.tree.DescendLeaves(sc.leaf, sc.groups, sc.u)
	for b, i := range sc.leaf {
		if i >= 0 {
			sc.prio[b], sc.gen[b] = p.tree.Get(i), p.pgen[i]
		}
	}
	if p.twoLock {
		p.leafMu.RUnlock()
	}

	// Copy the data, and draw again where the draw is void: it landed in
	// a group whose leaves another goroutine has changed but not yet
	// propagated (i < 0), or on a slot an actor is overwriting, whose data
	// is already newer than the priority drawn. Each redraw is
	// independent, so accepted draws stay exactly proportional to the
	// priorities of the slots whose data matches them.
	dst.resize(n, p.cfg.ObsSize, p.cfg.ActSize)
	for b, i := range sc.leaf {
		for try := 0; ; try++ {
			if i >= 0 {
				if g := p.st.read(dst, b, i); g == sc.gen[b] {
					dst.Index[b], dst.Gen[b] = i, g
					break
				}
			}
			if try == 100 {
				return fmt.Errorf("%w: no positive priority found", ErrEmpty)
			}
			i, sc.prio[b], sc.gen[b], total = p.drawOne(r)
		}
	}
	minP := math.Inf(1)
	for b := range sc.leaf {
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

// drawOne is the slow path of Sample: one independent draw (slot, its
// priority and generation, and the total), or slot -1.
func (p *Prioritized) drawOne(r *rand.Rand) (int, float64, uint64, float64) {
	var u [1]float64
	var g, leaf [1]int
	if p.twoLock {
		p.treeMu.RLock()
	}
	total := p.tree.Total()
	u[0] = r.Float64() * total
	p.tree.DescendInner(g[:], u[:])
	if p.twoLock {
		p.treeMu.RUnlock()
		p.leafMu.RLock()
		defer p.leafMu.RUnlock()
	}
	p.tree.DescendLeaves(leaf[:], g[:], u[:])
	if leaf[0] < 0 {
		return -1, 0, 0, total
	}
	return leaf[0], p.tree.Get(leaf[0]), p.pgen[leaf[0]], total
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
	if err := checkPriorities(priorities); err != nil {
		return 0, err
	}
	if len(idx) == 0 {
		return 0, nil
	}
	if !p.twoLock {
		p.global.Lock()
		defer p.global.Unlock()
	}
	sc := p.getScratch(len(idx))
	defer p.pool.Put(sc)
	// Powers outside the lock.
	for k, x := range priorities {
		sc.prio[k] = p.pow(x)
	}
	p.lockLeaf()
	m := 0
	for k, i := range idx {
		if gen[k] == 0 || p.pgen[i] != gen[k] {
			continue
		}
		sc.idx[m] = i
		sc.prio[m] = sc.prio[k]
		p.maxP = max(p.maxP, priorities[k])
		m++
	}
	sc.delta = p.tree.SetLeaves(sc.delta, sc.idx[:m], sc.prio[:m])
	p.pending.Add(1)
	p.unlockLeaf()
	p.propagate(sc.idx[:m], sc.delta)
	return m, nil
}

// Priority returns the stored value p_i^α of slot i and the generation it
// belongs to (for tests and diagnostics).
func (p *Prioritized) Priority(i int) (float64, uint64, error) {
	if i < 0 || i >= p.cfg.Capacity {
		return 0, 0, fmt.Errorf("%w: %d not in [0, %d)", ErrIndex, i, p.cfg.Capacity)
	}
	if !p.twoLock {
		p.global.Lock()
		defer p.global.Unlock()
	}
	p.lockLeafR()
	defer p.unlockLeafR()
	return p.tree.Get(i), p.pgen[i], nil
}

func (p *Prioritized) lockLeafR() {
	if p.twoLock {
		p.leafMu.RLock()
	}
}

func (p *Prioritized) unlockLeafR() {
	if p.twoLock {
		p.leafMu.RUnlock()
	}
}

// Verify checks the buffer's invariants and returns the first violation:
// the tree's inner nodes match their children within tol (relative), and
// every slot with a positive priority holds the generation its priority
// was set for. Meant for tests; it holds both locks for O(N).
func (p *Prioritized) Verify(tol float64) error {
	if !p.twoLock {
		p.global.Lock()
		defer p.global.Unlock()
	} else {
		p.treeMu.Lock()
		defer p.treeMu.Unlock()
		p.leafMu.Lock()
		defer p.leafMu.Unlock()
	}
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
		if g != p.pgen[i] {
			return fmt.Errorf("replay: slot %d has priority for generation %d but holds %d", i, p.pgen[i], g)
		}
	}
	return nil
}
