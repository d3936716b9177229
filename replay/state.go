package replay

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// ErrState marks a saved buffer state that is malformed or was taken from
// a buffer of another kind or shape.
var ErrState = errors.New("replay: bad saved state")

// Kinds of saved state, the first byte of MarshalBinary's output.
const (
	stateUniform     = 'U'
	statePrioritized = 'P'
	stateVersion     = 1
)

// appendState appends the storage's exact state: the reservation and
// write counters, then the generation and record of every slot written so
// far (slots never written are all zero and are not saved).
func (s *storage) appendState(b []byte) []byte {
	used := s.used()
	b = binary.LittleEndian.AppendUint64(b, uint64(s.capacity))
	b = binary.LittleEndian.AppendUint32(b, uint32(s.stride))
	b = binary.LittleEndian.AppendUint64(b, s.next.Load())
	b = binary.LittleEndian.AppendUint64(b, uint64(s.written.Load()))
	for _, g := range s.gen[:used] {
		b = binary.LittleEndian.AppendUint64(b, g)
	}
	for _, v := range s.rec[:used*s.stride] {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	return b
}

// used is the number of slots that have been reserved (at most the
// capacity): those a state saves.
func (s *storage) used() int { return int(min(s.next.Load(), uint64(s.capacity))) }

// stateSize is the length of appendState's output.
func (s *storage) stateSize() int { return 28 + s.used()*(8+4*s.stride) }

// loadState restores appendState's output from the front of b into a
// storage of the same shape and returns the rest of b.
func (s *storage) loadState(b []byte) ([]byte, error) {
	if len(b) < 28 {
		return nil, fmt.Errorf("%w: %d bytes", ErrState, len(b))
	}
	c, stride := binary.LittleEndian.Uint64(b), int(binary.LittleEndian.Uint32(b[8:]))
	next, written := binary.LittleEndian.Uint64(b[12:]), int64(binary.LittleEndian.Uint64(b[20:]))
	if c != uint64(s.capacity) || stride != s.stride {
		return nil, fmt.Errorf("%w: saved from a buffer of %d slots of %d words, not %d of %d", ErrState, c, stride, s.capacity, s.stride)
	}
	used := int(min(next, c))
	if written < 0 || written > int64(next) || len(b)-28 < used*(8+4*stride) {
		return nil, fmt.Errorf("%w: %d bytes for %d slots (next %d, written %d)", ErrState, len(b)-28, used, next, written)
	}
	b = b[28:]
	for i := range used {
		s.gen[i] = binary.LittleEndian.Uint64(b[8*i:])
		if s.gen[i] == 0 {
			return nil, fmt.Errorf("%w: slot %d below the reservation counter was never written", ErrState, i)
		}
	}
	b = b[8*used:]
	rec := s.rec[:used*stride]
	for i := range rec {
		rec[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	s.next.Store(next)
	s.written.Store(written)
	return b[4*len(rec):], nil
}

// MarshalBinary returns the buffer's whole state — every transition, its
// slot and generation, and the FIFO position — so that UnmarshalBinary
// into a buffer with the same Config continues it exactly: the same
// draws from the same random stream, the same evictions. No goroutine may
// add to the buffer meanwhile.
func (u *Uniform) MarshalBinary() ([]byte, error) {
	if u.cfg.Locking == GlobalLock {
		u.global.Lock()
		defer u.global.Unlock()
	}
	b := make([]byte, 0, 2+u.st.stateSize())
	return u.st.appendState(append(b, stateUniform, stateVersion)), nil
}

// UnmarshalBinary restores a state MarshalBinary returned into a buffer
// created with the same Config; nothing else may use the buffer meanwhile.
// On error the buffer may be partly restored: discard it.
func (u *Uniform) UnmarshalBinary(b []byte) error {
	if len(b) < 2 || b[0] != stateUniform || b[1] != stateVersion {
		return fmt.Errorf("%w: not a uniform buffer's state (version %d)", ErrState, stateVersion)
	}
	if u.cfg.Locking == GlobalLock {
		u.global.Lock()
		defer u.global.Unlock()
	}
	rest, err := u.st.loadState(b[2:])
	if err == nil && len(rest) != 0 {
		err = fmt.Errorf("%w: %d bytes after the state", ErrState, len(rest))
	}
	return err
}

// MarshalBinary returns the buffer's whole state: the transitions with
// their slots and generations, the FIFO position, the sum tree exactly as
// it stands (inner sums with their rounding, sumtree.Tree.AppendState),
// the running maximum priority, β and the count of priority writes since
// the last rebuild, so that UnmarshalBinary into a buffer with the same
// Config continues it bit for bit. No goroutine may use the buffer
// meanwhile.
func (p *Prioritized) MarshalBinary() ([]byte, error) {
	if p.twoLock {
		p.lockTree()
		defer p.unlockTree()
	} else {
		p.global.Lock()
		defer p.global.Unlock()
	}
	b := make([]byte, 0, 26+p.st.stateSize()+p.tree.StateSize())
	b = append(b, statePrioritized, stateVersion)
	b = binary.LittleEndian.AppendUint64(b, p.maxP.Load())
	b = binary.LittleEndian.AppendUint64(b, p.beta.Load())
	b = binary.LittleEndian.AppendUint64(b, uint64(p.sinceRebuild.Load()))
	b = p.st.appendState(b)
	return p.tree.AppendState(b), nil
}

// UnmarshalBinary restores a state MarshalBinary returned into a buffer
// created with the same Config; nothing else may use the buffer meanwhile.
// On error the buffer may be partly restored: discard it.
func (p *Prioritized) UnmarshalBinary(b []byte) error {
	if len(b) < 26 || b[0] != statePrioritized || b[1] != stateVersion {
		return fmt.Errorf("%w: not a prioritized buffer's state (version %d)", ErrState, stateVersion)
	}
	maxP, beta := math.Float64frombits(binary.LittleEndian.Uint64(b[2:])), math.Float64frombits(binary.LittleEndian.Uint64(b[10:]))
	since := int64(binary.LittleEndian.Uint64(b[18:]))
	if !(maxP >= 0 && maxP <= p.maxRaw) || !(beta >= 0 && beta <= 1) || since < 0 {
		return fmt.Errorf("%w: maximum priority %v, β %v, %d writes since the rebuild", ErrState, maxP, beta, since)
	}
	if p.twoLock {
		p.lockTree()
		defer p.unlockTree()
	} else {
		p.global.Lock()
		defer p.global.Unlock()
	}
	rest, err := p.st.loadState(b[26:])
	if err != nil {
		return err
	}
	if rest, err = p.tree.LoadState(rest); err != nil {
		return fmt.Errorf("%w: %w", ErrState, err)
	}
	if len(rest) != 0 {
		return fmt.Errorf("%w: %d bytes after the state", ErrState, len(rest))
	}
	p.maxP.Store(math.Float64bits(maxP))
	p.beta.Store(math.Float64bits(beta))
	p.sinceRebuild.Store(since)
	return nil
}
