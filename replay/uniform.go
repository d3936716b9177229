package replay

import (
	"fmt"
	"math/rand/v2"
	"sync"
)

// Uniform is a FIFO ring buffer sampled uniformly with replacement.
//
// Add reserves its slots with an atomic fetch-add and copies under
// per-stripe locks only, so actors insert concurrently with each other and
// with learners; Sample copies each drawn transition under its stripe's
// read lock. With Locking GlobalLock one mutex serialises everything
// instead (the baseline). Cost: Add O(n·transition size), Sample
// O(n·transition size); nothing is allocated after the first Sample into a
// given dst.
type Uniform struct {
	cfg    Config
	st     *storage
	global sync.Mutex // used only with GlobalLock
}

// NewUniform returns an empty uniform buffer; the Prioritized-only fields
// of cfg are ignored.
func NewUniform(cfg Config) (*Uniform, error) {
	cfg = cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Uniform{cfg: cfg, st: newStorage(cfg, minStripeBlock)}, nil
}

// Config returns the resolved configuration.
func (u *Uniform) Config() Config { return u.cfg }

// Len returns the number of transitions held.
func (u *Uniform) Len() int { return u.st.Len() }

// Cap returns the capacity.
func (u *Uniform) Cap() int { return u.cfg.Capacity }

// Add copies b into the buffer, evicting the oldest transitions when full.
func (u *Uniform) Add(b *Batch) error {
	if err := u.st.checkAdd(b); err != nil {
		return err
	}
	if u.cfg.Locking == GlobalLock {
		u.global.Lock()
		defer u.global.Unlock()
	}
	u.st.write(b, u.st.reserve(b.Len()), nil)
	return nil
}

// Sample draws n transitions uniformly with replacement into dst, with
// Weight 1 and Prob 1/Len.
func (u *Uniform) Sample(dst *Sample, n int, r *rand.Rand) error {
	if u.cfg.Locking == GlobalLock {
		u.global.Lock()
		defer u.global.Unlock()
	}
	size := u.st.Len()
	if size == 0 {
		return ErrEmpty
	}
	if n < 1 || n > size {
		return fmt.Errorf("%w: sampling %d from %d", ErrTooMany, n, size)
	}
	// Slots below bound have been reserved; one still being copied for
	// the first time reads generation 0 and is drawn again.
	bound := int(min(u.st.next.Load(), uint64(u.cfg.Capacity)))
	dst.resize(n, u.cfg.ObsSize, u.cfg.ActSize)
	p := 1 / float64(size)
	// Draw every slot, then copy. Each copy takes its stripe's read lock,
	// an atomic read-modify-write that no later load may pass, so copies
	// drawn one at a time wait out their cache misses one after another;
	// prefetching the drawn records first lets the misses overlap. The
	// draws are the same, in the same order, as drawing each slot before
	// its copy, as long as no draw lands on a slot still being written
	// (then it is drawn again after the others).
	for i := 0; i < n; i++ {
		slot := r.IntN(bound)
		dst.Index[i] = slot
		u.st.prefetch(slot)
	}
	for i := 0; i < n; i++ {
		slot := dst.Index[i]
		for try := 0; ; try++ {
			if g := u.st.read(dst, i, slot); g != 0 {
				dst.Index[i], dst.Gen[i] = slot, g
				break
			}
			if try == 1000 {
				return fmt.Errorf("%w: no written slot found", ErrEmpty)
			}
			slot = r.IntN(bound)
		}
		dst.Weight[i] = 1
		dst.Prob[i] = p
	}
	return nil
}
