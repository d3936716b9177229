package replay

import (
	"errors"
	"fmt"
	"math/rand/v2"

	"herd/internal/scratch"
	"herd/replay/sumtree"
	"herd/sample"
)

// Errors. Every error returned by this package wraps one of these, so
// callers check them with errors.Is.
var (
	// ErrConfig marks an invalid Config or RateLimiterConfig.
	ErrConfig = errors.New("replay: invalid config")
	// ErrShape marks a batch whose slices do not match the configured
	// transition shape or each other.
	ErrShape = errors.New("replay: batch shape mismatch")
	// ErrPriority marks a NaN, infinite or negative priority, or one whose
	// power p^α exceeds sumtree.MaxPriority (about 3.4e38).
	ErrPriority = errors.New("replay: invalid priority")
	// ErrEmpty is returned when sampling a buffer that holds nothing
	// (or, for Prioritized, only zero priorities).
	ErrEmpty = errors.New("replay: buffer is empty")
	// ErrTooMany is returned when asking for more samples than the buffer
	// holds, or inserting a batch larger than its capacity.
	ErrTooMany = errors.New("replay: batch larger than buffer")
	// ErrIndex marks an index outside the buffer or mismatched lengths in
	// UpdatePriorities.
	ErrIndex = errors.New("replay: bad index")
	// ErrBeta marks a β outside [0, 1].
	ErrBeta = errors.New("replay: beta out of range")
	// ErrClosed is returned by a RateLimiter after Close.
	ErrClosed = errors.New("replay: closed")
)

// Locking selects the synchronisation of a buffer.
type Locking int

const (
	// TwoLock has the two locks of the PAL paper's buffer (Zhang,
	// Kuppannagari and Prasanna, 2021), finer, but not its lazy writing:
	// slots reserved by an atomic fetch-add, data and leaves written
	// together under per-stripe locks, inner levels updated by atomic adds
	// under a tree lock that writers share, searches without a lock (see
	// Prioritized).
	TwoLock Locking = iota
	// GlobalLock puts one mutex around every operation: the baseline.
	GlobalLock
)

// String returns "two-lock" or "global".
func (l Locking) String() string {
	switch l {
	case TwoLock:
		return "two-lock"
	case GlobalLock:
		return "global"
	}
	return fmt.Sprintf("Locking(%d)", int(l))
}

// ParseLocking is the inverse of String.
func ParseLocking(s string) (Locking, error) {
	switch s {
	case "two-lock", "twolock":
		return TwoLock, nil
	case "global", "global-lock":
		return GlobalLock, nil
	}
	return 0, fmt.Errorf("%w: unknown variant %q (want two-lock or global)", ErrConfig, s)
}

// Config describes a buffer. The zero value of each optional field means
// its default.
type Config struct {
	// Capacity is the number of transitions kept; the oldest is evicted
	// first (FIFO). Required.
	Capacity int
	// ObsSize is the number of float32 in one observation. Required.
	ObsSize int
	// ActSize is the number of float32 in one action. Default 1 (a
	// discrete action stored as a float32, exact below 2^24).
	ActSize int
	// ObsEncoding is how observations are stored: sample.ObsFloat32 (the
	// default), sample.ObsUint8 (a byte per value: 8-bit pixels) or
	// sample.ObsBits (a bit per value: binary planes such as MinAtar's,
	// 32 times smaller) — the encodings observations travel in (package
	// sample). Sample returns the float32 values Add was given either
	// way, bit for bit. An Add whose observations hold a value the
	// encoding cannot represent exactly (sample.EncodingOf) first widens
	// the whole buffer, once, to an encoding that can: the memory of the
	// wider records is then allocated, and every stored transition
	// converted, while every copy in and out waits.
	ObsEncoding sample.ObsEncoding
	// ObsFloatTail is the number of values at the end of each
	// observation stored as float32 whatever ObsEncoding says (a side
	// value riding along, such as a per-row discount). Default 0.
	ObsFloatTail int

	// Alpha is the priority exponent α of Prioritized: slot i is drawn
	// with probability p_i^α / Σ_k p_k^α. Default 0.6; must be in (0, 1]
	// (use Uniform for α = 0).
	Alpha float64
	// Beta is the initial importance-sampling exponent β of Prioritized,
	// in [0, 1]; change it while running with SetBeta. Default 0.4.
	Beta float64
	// Fanout is the sum tree's K. Default sumtree.DefaultFanout.
	Fanout int
	// Stratified makes Prioritized draw one sample per equal-mass segment
	// of the total priority instead of independent draws.
	Stratified bool
	// Locking is TwoLock (default) or GlobalLock.
	Locking Locking
	// RebuildEvery is the number of priority writes after which
	// Prioritized rebuilds its sum tree exactly (removing float drift).
	// Default 8·Capacity; negative disables.
	RebuildEvery int
}

// EnsureDefaults fills the zero fields with their defaults and returns c.
func (c Config) EnsureDefaults() Config {
	if c.ActSize == 0 {
		c.ActSize = 1
	}
	if c.Alpha == 0 {
		c.Alpha = 0.6
	}
	if c.Beta == 0 {
		c.Beta = 0.4
	}
	if c.Fanout == 0 {
		c.Fanout = sumtree.DefaultFanout
	}
	if c.RebuildEvery == 0 {
		c.RebuildEvery = 8 * c.Capacity
	}
	return c
}

// Validate reports every problem of c (after EnsureDefaults), joined.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrConfig}, a...)...))
	}
	if c.Capacity < 1 || c.Capacity > 1<<40 {
		bad("Capacity %d not in [1, 2^40]", c.Capacity)
	}
	if c.ObsSize < 1 {
		bad("ObsSize %d < 1", c.ObsSize)
	}
	if c.ActSize < 1 {
		bad("ActSize %d < 1", c.ActSize)
	}
	if c.ObsEncoding > sample.ObsBits {
		bad("ObsEncoding %d unknown", c.ObsEncoding)
	}
	if c.ObsFloatTail < 0 || c.ObsFloatTail > max(c.ObsSize, 0) {
		bad("ObsFloatTail %d not in [0, ObsSize %d]", c.ObsFloatTail, c.ObsSize)
	}
	if !(c.Alpha > 0 && c.Alpha <= 1) {
		bad("Alpha %v not in (0, 1]", c.Alpha)
	}
	if !(c.Beta >= 0 && c.Beta <= 1) {
		bad("Beta %v not in [0, 1]", c.Beta)
	}
	if k := c.Fanout; k < 2 || k > 64 || k&(k-1) != 0 {
		bad("Fanout %d not a power of two in [2, 64]", k)
	}
	if c.Locking != TwoLock && c.Locking != GlobalLock {
		bad("Locking %d unknown", int(c.Locking))
	}
	return errors.Join(errs...)
}

// SlotBytes is the memory one slot of a buffer with this Config takes
// until an Add widens its encoding: its record and generation (the sum
// tree of Prioritized not counted). c must be valid.
func (c Config) SlotBytes() int {
	c = c.EnsureDefaults()
	return newLayout(c.ObsEncoding, c.ObsSize, c.ObsFloatTail, c.ActSize).slotBytes()
}

// Batch is a batch of n transitions in flat, row-major slices: row i of
// Obs is Obs[i·ObsSize:(i+1)·ObsSize]. The buffers copy from and into it;
// they never keep a reference.
type Batch struct {
	Obs        []float32 // n·ObsSize
	Action     []float32 // n·ActSize
	Reward     []float32 // n
	NextObs    []float32 // n·ObsSize
	Terminated []bool    // n
	Truncated  []bool    // n
}

// Len returns the number of transitions (len(Reward)).
func (b *Batch) Len() int { return len(b.Reward) }

// Resize sets the lengths for n transitions of the given shape, reusing
// the backing arrays when they are large enough.
func (b *Batch) Resize(n, obsSize, actSize int) {
	b.Obs = scratch.Resize(b.Obs, n*obsSize)
	b.Action = scratch.Resize(b.Action, n*actSize)
	b.Reward = scratch.Resize(b.Reward, n)
	b.NextObs = scratch.Resize(b.NextObs, n*obsSize)
	b.Terminated = scratch.Resize(b.Terminated, n)
	b.Truncated = scratch.Resize(b.Truncated, n)
}

// check reports whether b has the shape (obsSize, actSize).
func (b *Batch) check(obsSize, actSize int) error {
	n := len(b.Reward)
	if len(b.Obs) != n*obsSize || len(b.NextObs) != n*obsSize || len(b.Action) != n*actSize ||
		len(b.Terminated) != n || len(b.Truncated) != n {
		return fmt.Errorf("%w: n=%d (len Reward) wants Obs/NextObs %d, Action %d, Terminated/Truncated %d; got %d/%d, %d, %d/%d",
			ErrShape, n, n*obsSize, n*actSize, n, len(b.Obs), len(b.NextObs), len(b.Action), len(b.Terminated), len(b.Truncated))
	}
	return nil
}

// Sample is what a buffer's Sample writes: the transitions, the slot each
// came from, the slot's generation at the time it was read, and the
// importance-sampling weight. The caller owns it and reuses it; Sample
// resizes it on first use and then allocates nothing.
type Sample struct {
	Batch
	// Index[i] is the slot of transition i; pass it back to
	// UpdatePriorities.
	Index []int
	// Gen[i] is the generation of slot Index[i] (how many times the slot
	// had been written, counting from 1) when transition i was copied;
	// UpdatePriorities ignores an update whose slot has been overwritten
	// since.
	Gen []uint64
	// Weight[i] is the importance-sampling weight (all 1 for Uniform).
	Weight []float32
	// Prob[i] is the probability with which slot Index[i] was drawn.
	Prob []float64
}

// Len returns the number of sampled transitions.
func (s *Sample) Len() int { return len(s.Index) }

func (s *Sample) resize(n, obsSize, actSize int) {
	s.Batch.Resize(n, obsSize, actSize)
	s.Index = scratch.Resize(s.Index, n)
	s.Gen = scratch.Resize(s.Gen, n)
	s.Weight = scratch.Resize(s.Weight, n)
	s.Prob = scratch.Resize(s.Prob, n)
}

// Buffer is what an algorithm needs from a replay buffer. Add is called by
// actors, Sample by learners, from any number of goroutines at once.
// Errors wrap the package sentinels; none is worth retrying unchanged
// except ErrEmpty and ErrTooMany, which go away once more is inserted.
type Buffer interface {
	// Add copies the batch into the buffer, evicting the oldest
	// transitions when full.
	Add(b *Batch) error
	// Sample draws n transitions into dst using r, which must belong to
	// the calling goroutine.
	Sample(dst *Sample, n int, r *rand.Rand) error
	// Len returns the number of transitions held.
	Len() int
	// Cap returns the capacity.
	Cap() int
}

// PriorityUpdater is the optional interface of buffers that take new
// priorities for sampled transitions (Prioritized).
type PriorityUpdater interface {
	UpdatePriorities(idx []int, gen []uint64, priorities []float64) (updated int, err error)
}

var (
	_ Buffer          = (*Uniform)(nil)
	_ Buffer          = (*Prioritized)(nil)
	_ PriorityUpdater = (*Prioritized)(nil)
)
