package replay

import (
	"fmt"
	"sync"
	"sync/atomic"
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

	stripeMask int // len(stripes) − 1
	stripes    []paddedRW

	_       cacheLinePad
	next    atomic.Uint64 // next position to reserve
	_       cacheLinePad
	written atomic.Int64 // transitions whose copy has finished
	_       cacheLinePad
}

// cacheLinePad keeps fields that different cores write on different cache
// lines (two lines: adjacent-line prefetch pairs them on x86).
type cacheLinePad [128]byte

// stripeBlock is the number of consecutive slots that share a stripe lock.
const stripeBlock = 16

// stripe returns the lock guarding slot's data.
func (s *storage) stripe(slot int) *paddedRW {
	return &s.stripes[(slot/stripeBlock)&s.stripeMask]
}

// paddedRW keeps neighbouring stripe locks on different cache lines.
type paddedRW struct {
	sync.RWMutex
	_ [64 - 24]byte
}

func newStorage(capacity, obsSize, actSize int) *storage {
	s := &storage{
		capacity: capacity,
		obsSize:  obsSize,
		actSize:  actSize,
		stride:   2*obsSize + actSize + 2,
		gen:      make([]uint64, capacity),
	}
	s.rec = make([]float32, capacity*s.stride)
	// Slots are grouped in blocks of 16 and blocks are dealt round-robin
	// to at most 1024 stripes: consecutive batches of concurrent actors
	// (adjacent reservations) land on different stripes, and the lock
	// array (64 KiB) stays in cache for the learners' random reads.
	n := 1
	for n < 1024 && n*stripeBlock < capacity {
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
// time.
func (s *storage) write(b *Batch, start uint64) {
	n := b.Len()
	for i := 0; i < n; {
		slot, _ := s.slotGen(start + uint64(i))
		// Slots i … i+end-1 share a block (so a stripe) and do not wrap.
		blk := slot / stripeBlock
		end := min(n-i, (blk+1)*stripeBlock-slot, s.capacity-slot)
		mu := s.stripe(slot)
		mu.Lock()
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
		}
		mu.Unlock()
		i += end
	}
	s.written.Add(int64(n))
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

// read copies slot into row i of dst and returns the slot's generation (0
// if never written).
func (s *storage) read(dst *Sample, i, slot int) uint64 {
	o, a := s.obsSize, s.actSize
	mu := s.stripe(slot)
	mu.RLock()
	g := s.gen[slot]
	r := s.rec[slot*s.stride : (slot+1)*s.stride]
	copySmall(dst.Obs[i*o:(i+1)*o], r[:o])
	copySmall(dst.NextObs[i*o:(i+1)*o], r[o:2*o])
	copySmall(dst.Action[i*a:(i+1)*a], r[2*o:2*o+a])
	dst.Reward[i] = r[2*o+a]
	f := int(r[2*o+a+1])
	mu.RUnlock()
	dst.Terminated[i] = f&flagTerminated != 0
	dst.Truncated[i] = f&flagTruncated != 0
	return g
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
