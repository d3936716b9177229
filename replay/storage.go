package replay

import (
	"fmt"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"herd/replay/sumtree"
)

// storage is the preallocated flat transition store shared by Uniform and
// Prioritized, allocated once. Each slot is one record of float32 words,
// [obs | next_obs | action | reward | flags], so a random read touches one
// or two cache lines instead of one per field (the layout that matters
// when learners sample at random from a buffer larger than the cache).
//
// Slots are reserved by an atomic fetch-add on a position counter (seed
// 000 §IV-D); position p lives in slot p mod capacity and is that slot's
// generation p/capacity + 1, so eviction is FIFO by construction.
//
// Copies in and out take the RWMutex of the slot's stripe (a run of
// consecutive slots), never a buffer-wide lock: a writer holds the stripe
// while it copies one batch's slots, a reader holds it while it copies one
// transition, so a reader never sees half-written data, and data and
// generation are always read together.
type storage struct {
	// Read-only after newStorage, read by every copy in and out: kept
	// off the cache lines of the counters below, which every Add writes
	// (sharing a line with them made each learner read miss).
	capacity int
	obsSize  int
	actSize  int

	// Guarded by the slot's stripe.
	rec    []float32 // capacity·stride words
	gen    []uint64  // 0: never written
	stride int       // 2·obsSize + actSize + 2

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

// newStorage allocates the store; block (a power of two, at least
// minStripeBlock) is the number of consecutive slots that share a stripe,
// so that any aligned run of block slots — a sum tree's group of sibling
// leaves — is under one lock.
func newStorage(capacity, obsSize, actSize, block int) *storage {
	block = max(block, minStripeBlock)
	s := &storage{
		capacity: capacity,
		obsSize:  obsSize,
		actSize:  actSize,
		stride:   2*obsSize + actSize + 2,
		gen:      make([]uint64, capacity),
	}
	s.blockShift = uint(bits.TrailingZeros(uint(block)))
	s.rec = make([]float32, capacity*s.stride)
	// Slots are grouped in blocks and blocks are dealt round-robin to at
	// most 1024 stripes: consecutive batches of concurrent actors
	// (adjacent reservations) land on different stripes, and the lock
	// array (64 KiB) stays in cache for the learners' random reads.
	n := 1
	for n < 1024 && n*block < capacity {
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
// published together with the data.
func (s *storage) write(b *Batch, start uint64, set func(k, slot int)) {
	n := b.Len()
	for i := 0; i < n; {
		slot, _ := s.slotGen(start + uint64(i))
		// Slots i … i+end-1 share a block (so a stripe) and do not wrap.
		blk := slot >> s.blockShift
		end := min(n-i, (blk+1)<<s.blockShift-slot, s.capacity-slot)
		mu := s.stripe(slot)
		mu.lockSpin()
		for k := 0; k < end; k++ {
			_, g := s.slotGen(start + uint64(i+k))
			if s.gen[slot+k] > g {
				// A writer a whole lap ahead already filled this slot
				// (this one was descheduled that long): the newer
				// transition wins, as FIFO eviction says it should.
				continue
			}
			s.gen[slot+k] = g
			s.put(slot+k, b, i+k)
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

// Flags word values.
const (
	flagTerminated = 1
	flagTruncated  = 2
)

// put copies row i of b into slot's record.
func (s *storage) put(slot int, b *Batch, i int) {
	o, a := s.obsSize, s.actSize
	r := s.rec[slot*s.stride : (slot+1)*s.stride]
	copySmall(r[:o], b.Obs[i*o:(i+1)*o])
	copySmall(r[o:2*o], b.NextObs[i*o:(i+1)*o])
	copySmall(r[2*o:2*o+a], b.Action[i*a:(i+1)*a])
	r[2*o+a] = b.Reward[i]
	f := float32(0)
	if b.Terminated[i] {
		f += flagTerminated
	}
	if b.Truncated[i] {
		f += flagTruncated
	}
	r[2*o+a+1] = f
}

// prefetch starts bringing slot's record, generation and stripe lock into
// the cache (see Uniform.Sample).
func (s *storage) prefetch(slot int) {
	r := s.rec[slot*s.stride : (slot+1)*s.stride]
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
	o, a := s.obsSize, s.actSize
	r := s.rec[slot*s.stride : (slot+1)*s.stride]
	copySmall(dst.Obs[i*o:(i+1)*o], r[:o])
	copySmall(dst.NextObs[i*o:(i+1)*o], r[o:2*o])
	copySmall(dst.Action[i*a:(i+1)*a], r[2*o:2*o+a])
	dst.Reward[i] = r[2*o+a]
	f := int(r[2*o+a+1])
	dst.Terminated[i] = f&flagTerminated != 0
	dst.Truncated[i] = f&flagTruncated != 0
	return s.gen[slot]
}

// checkAdd validates a batch for insertion.
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
	return nil
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
