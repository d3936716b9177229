package replay

import (
	"fmt"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"herd/replay/sumtree"
	"herd/sample"
)

// storage is the preallocated flat transition store shared by Uniform and
// Prioritized, allocated once. Each slot is one record of 32-bit words, so
// a random read touches one or two cache lines instead of one per field
// (the layout that matters when learners sample at random from a buffer
// larger than the cache); see layout for what a record holds.
//
// Slots are reserved by an atomic fetch-add on a position counter (seed
// 000 §IV-D); position p lives in slot p mod capacity and is that slot's
// generation p/capacity + 1, so eviction is FIFO by construction.
//
// Copies in and out take the RWMutex of the slot's stripe (a run of
// consecutive slots), never a buffer-wide lock: a writer holds the stripe
// while it copies one batch's slots, a reader holds it while it copies one
// transition, so a reader never sees half-written data, and data and
// generation are always read together. widen, which replaces the records,
// holds every stripe.
type storage struct {
	// Read-only after newStorage (lay: replaced only by widen), read by
	// every copy in and out: kept off the cache lines of the counters
	// below, which every Add writes (sharing a line with them made each
	// learner read miss).
	capacity int
	obsSize  int
	actSize  int
	tail     int // Config.ObsFloatTail

	// lay is the records and their layout; loaded under the slot's
	// stripe, the records are guarded by it.
	lay atomic.Pointer[layout]
	gen []uint64 // guarded by the slot's stripe; 0: never written

	blockShift uint // log2 of the slots per stripe block
	stripeMask int  // len(stripes) − 1
	stripes    []paddedRW

	_       cacheLinePad
	next    atomic.Uint64 // next position to reserve
	_       cacheLinePad
	written atomic.Int64 // transitions whose copy has finished (stops once ≥ capacity)
	_       cacheLinePad
}

// cacheLinePad keeps fields that different cores write on different cache
// lines (two lines: adjacent-line prefetch pairs them on x86).
type cacheLinePad [128]byte

// minStripeBlock is the least number of consecutive slots that share a
// stripe lock.
const minStripeBlock = 16

// stripe returns the lock guarding slot's data.
func (s *storage) stripe(slot int) *paddedRW {
	return &s.stripes[(slot>>s.blockShift)&s.stripeMask]
}

// paddedRW keeps neighbouring stripe locks on different cache lines.
type paddedRW struct {
	sync.RWMutex
	_ [64 - 24]byte
}

// spinTries bounds how long a stripe lock is polled before its caller
// yields, and yieldTries how many times it yields before it parks in Lock.
// Stripe critical sections last well under a microsecond, while a
// goroutine that parks on one, once woken, waits for a processor, which a
// busy goroutine may hold for a whole scheduling slice (about 10 ms):
// sync.RWMutex spins only while its processor has nothing else to run, so
// with more goroutines than cores it parks at once. But yielding with
// nothing else to run returns at once, so unbounded yielding is polling:
// when the holder's thread is descheduled (cores shared with other
// processes) it would hold a core for nothing; after yieldTries (a few
// microseconds) the caller parks.
const (
	spinTries  = 64
	yieldTries = 16
)

// lockSpin is Lock, polling TryLock first, then yielding between polls,
// then parking (see spinTries).
func (l *paddedRW) lockSpin() {
	for i := 0; !l.TryLock(); i++ {
		switch {
		case i < spinTries:
		case i < spinTries+yieldTries:
			runtime.Gosched()
		default:
			l.Lock()
			return
		}
	}
}

// newStorage allocates the store for cfg (validated); block (a power of
// two, at least minStripeBlock) is the number of consecutive slots that
// share a stripe, so that any aligned run of block slots — a sum tree's
// group of sibling leaves — is under one lock.
func newStorage(cfg Config, block int) *storage {
	block = max(block, minStripeBlock)
	s := &storage{
		capacity: cfg.Capacity,
		obsSize:  cfg.ObsSize,
		actSize:  cfg.ActSize,
		tail:     cfg.ObsFloatTail,
		gen:      make([]uint64, cfg.Capacity),
	}
	s.blockShift = uint(bits.TrailingZeros(uint(block)))
	l := newLayout(cfg.ObsEncoding, s.obsSize, s.tail, s.actSize)
	l.rec = make([]float32, s.capacity*l.stride)
	s.lay.Store(l)
	// Slots are grouped in blocks and blocks are dealt round-robin to at
	// most 1024 stripes: consecutive batches of concurrent actors
	// (adjacent reservations) land on different stripes, and the lock
	// array (64 KiB) stays in cache for the learners' random reads.
	n := 1
	for n < 1024 && n*block < s.capacity {
		n *= 2
	}
	s.stripeMask = n - 1
	s.stripes = make([]paddedRW, n)
	return s
}

// Len returns the number of slots holding a transition.
func (s *storage) Len() int { return int(min(s.written.Load(), int64(s.capacity))) }

// reserve claims n consecutive positions and returns the first.
func (s *storage) reserve(n int) uint64 { return s.next.Add(uint64(n)) - uint64(n) }

// slotGen maps a position to its slot and generation.
func (s *storage) slotGen(pos uint64) (int, uint64) {
	c := uint64(s.capacity)
	return int(pos % c), pos/c + 1
}

// write copies b into positions start … start+n-1, one stripe lock at a
// time, and calls set(k, slot) for each row k it writes while still
// holding the slot's stripe (nil: no call), so that what set changes is
// published together with the data. The layout holds b's observations
// (checkAdd widened it if needed; it only widens).
func (s *storage) write(b *Batch, start uint64, set func(k, slot int)) {
	n := b.Len()
	for i := 0; i < n; {
		slot, _ := s.slotGen(start + uint64(i))
		// Slots i … i+end-1 share a block (so a stripe) and do not wrap.
		blk := slot >> s.blockShift
		end := min(n-i, (blk+1)<<s.blockShift-slot, s.capacity-slot)
		mu := s.stripe(slot)
		mu.lockSpin()
		l := s.lay.Load()
		for k := 0; k < end; k++ {
			_, g := s.slotGen(start + uint64(i+k))
			if s.gen[slot+k] > g {
				// A writer a whole lap ahead already filled this slot
				// (this one was descheduled that long): the newer
				// transition wins, as FIFO eviction says it should.
				continue
			}
			s.gen[slot+k] = g
			l.put(l.record(slot+k), b, i+k)
			if set != nil {
				set(i+k, slot+k)
			}
		}
		mu.Unlock()
		i += end
	}
	// Len saturates at the capacity, so once the buffer is full the
	// counter is only read: no core has to take its cache line from the
	// others on every insert.
	if s.written.Load() < int64(s.capacity) {
		s.written.Add(int64(n))
	}
}

// prefetch starts bringing slot's record, generation and stripe lock into
// the cache (see Uniform.Sample). It reads the layout without the stripe:
// a layout widen has just replaced only makes the hint useless.
func (s *storage) prefetch(slot int) {
	r := s.lay.Load().record(slot)
	prefetch(unsafe.Pointer(&r[0]))
	prefetch(unsafe.Pointer(&r[len(r)-1])) // a record may straddle two lines
	prefetch(unsafe.Pointer(&s.gen[slot]))
	prefetch(unsafe.Pointer(s.stripe(slot)))
}

// read copies slot into row i of dst and returns the slot's generation (0
// if never written).
func (s *storage) read(dst *Sample, i, slot int) uint64 {
	mu := s.stripe(slot)
	mu.RLock()
	g := s.copyOut(dst, i, slot)
	mu.RUnlock()
	return g
}

// readLeaf finishes a sum-tree search in group g of t (mass u left) and
// copies the leaf's transition into row i of dst, holding the group's
// stripe throughout, so the leaf's priority and the data belong to the
// same transition. It returns the slot, its generation and its priority;
// slot -1 if no leaf of the group holds u or the slot holds no
// transition; slot -2, without waiting, if wait is false and a writer
// holds the stripe (an actor copying into it: its slots are in flight).
func (s *storage) readLeaf(dst *Sample, i, g int, u float64, t *sumtree.Tree, wait bool) (int, uint64, float64) {
	mu := s.stripe(t.GroupStart(g))
	if wait {
		mu.RLock()
	} else if !mu.TryRLock() {
		return -2, 0, 0
	}
	defer mu.RUnlock()
	slot := t.LeafInGroup(g, u)
	if slot < 0 || s.gen[slot] == 0 {
		return -1, 0, 0
	}
	return slot, s.copyOut(dst, i, slot), t.Get(slot)
}

// copyOut copies slot into row i of dst; the caller holds the stripe.
func (s *storage) copyOut(dst *Sample, i, slot int) uint64 {
	l := s.lay.Load()
	// put wrote the record (a loaded state's records were checked), so
	// get cannot fail.
	_ = l.get(l.record(slot), &dst.Batch, i)
	return s.gen[slot]
}

// checkAdd validates a batch for insertion and widens the layout when the
// batch holds an observation value its encoding cannot represent. The
// caller holds no stripe.
func (s *storage) checkAdd(b *Batch) error {
	if b == nil {
		return fmt.Errorf("%w: nil batch", ErrShape)
	}
	if err := b.check(s.obsSize, s.actSize); err != nil {
		return err
	}
	if b.Len() > s.capacity {
		return fmt.Errorf("%w: inserting %d transitions into capacity %d", ErrTooMany, b.Len(), s.capacity)
	}
	if enc := s.lay.Load().enc; enc != sample.ObsFloat32 {
		if need := s.encodingOf(b, enc); need != enc {
			s.widen(need)
		}
	}
	return nil
}

// encodingOf is the narrowest encoding, at most as narrow as enc, that
// holds every stored-encoded value (each observation but its float tail)
// of b.
func (s *storage) encodingOf(b *Batch, enc sample.ObsEncoding) sample.ObsEncoding {
	o, h := s.obsSize, s.obsSize-s.tail
	for i := range b.Len() {
		if e := sample.EncodingOf(b.Obs[i*o:i*o+h], b.NextObs[i*o:i*o+h]); e < enc {
			enc = e // wider; ObsFloat32 is the widest
		}
	}
	return enc
}

// widen replaces the records with ones in encoding enc, converting every
// slot, if enc is wider than the layout's (a value the layout cannot hold
// arrived). It holds every stripe meanwhile, so no copy in or out runs
// with the old records; the values read back are the same either way.
func (s *storage) widen(enc sample.ObsEncoding) {
	if s.lay.Load().enc <= enc {
		return
	}
	for i := range s.stripes {
		s.stripes[i].Lock()
	}
	defer func() {
		for i := range s.stripes {
			s.stripes[i].Unlock()
		}
	}()
	old := s.lay.Load()
	if old.enc <= enc {
		return // another writer widened it meanwhile
	}
	l := newLayout(enc, s.obsSize, s.tail, s.actSize)
	l.rec = make([]float32, s.capacity*l.stride)
	var row Batch
	row.Resize(1, s.obsSize, s.actSize)
	for slot := range s.used() {
		_ = old.get(old.record(slot), &row, 0) // as in copyOut
		l.put(l.record(slot), &row, 0)
	}
	s.lay.Store(l)
}

// copySmall is copy for rows of a few words, where the call into
// runtime.memmove costs more than the copy (it was a fifth of the mixed
// workload's CPU profile with CartPole-sized rows).
func copySmall(dst, src []float32) {
	if len(src) > 16 {
		copy(dst, src)
		return
	}
	dst = dst[:len(src)]
	for j, v := range src {
		dst[j] = v
	}
}
