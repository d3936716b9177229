package replay

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"herd/sample"
)

// ErrState marks a saved buffer state that is malformed or was taken from
// a buffer of another kind or shape.
var ErrState = errors.New("replay: bad saved state")

// Kinds of saved state, the first byte of MarshalBinary's output, and
// the version, the second. Version 1 saved every record as float32 words
// (observations as float32); it is still read.
const (
	stateUniform     = 'U'
	statePrioritized = 'P'
	stateVersion     = 2
)

// stateHeader is the length of appendState's header (version 2).
const stateHeader = 8 + 4 + 4 + 4 + 1 + 8 + 8

// appendState appends the storage's exact state: its shape and
// observation encoding, the reservation and write counters, then the
// generation and record of every slot written so far (slots never
// written are all zero and are not saved). A record's packed heads are
// saved as their bytes (sample's encoding), its words little-endian.
func (s *storage) appendState(b []byte) []byte {
	used, l := s.used(), s.lay.Load()
	b = binary.LittleEndian.AppendUint64(b, uint64(s.capacity))
	b = binary.LittleEndian.AppendUint32(b, uint32(s.obsSize))
	b = binary.LittleEndian.AppendUint32(b, uint32(s.actSize))
	b = binary.LittleEndian.AppendUint32(b, uint32(s.tail))
	b = append(b, byte(l.enc))
	b = binary.LittleEndian.AppendUint64(b, s.next.Load())
	b = binary.LittleEndian.AppendUint64(b, uint64(s.written.Load()))
	for _, g := range s.gen[:used] {
		b = binary.LittleEndian.AppendUint64(b, g)
	}
	for slot := range used {
		r, words := l.record(slot), 0
		if l.enc != sample.ObsFloat32 {
			b = append(b, l.headWordBytes(r)...)
			words = l.headWords
		}
		for _, v := range r[words:] {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
		}
	}
	return b
}

// used is the number of slots that have been reserved (at most the
// capacity): those a state saves.
func (s *storage) used() int { return int(min(s.next.Load(), uint64(s.capacity))) }

// stateSize is the length of appendState's output.
func (s *storage) stateSize() int { return stateHeader + s.used()*s.lay.Load().slotBytes() }

// loadState restores appendState's output (version 2, or 1) from the
// front of b into a storage of the same shape and returns the rest of b.
// A version-2 state keeps its encoding where it is wider than the
// storage's; version 1 (float32 records) is converted to the storage's
// encoding, widened as its values need.
func (s *storage) loadState(b []byte, version byte) ([]byte, error) {
	var src *layout
	var c, next uint64
	var written int64
	switch version {
	case 1:
		if len(b) < 28 {
			return nil, fmt.Errorf("%w: %d bytes", ErrState, len(b))
		}
		c = binary.LittleEndian.Uint64(b)
		stride := int(binary.LittleEndian.Uint32(b[8:]))
		next, written = binary.LittleEndian.Uint64(b[12:]), int64(binary.LittleEndian.Uint64(b[20:]))
		src = newLayout(sample.ObsFloat32, s.obsSize, 0, s.actSize)
		if c != uint64(s.capacity) || stride != src.stride {
			return nil, fmt.Errorf("%w: saved from a buffer of %d slots of %d words, not %d of %d", ErrState, c, stride, s.capacity, src.stride)
		}
		b = b[28:]
	case 2:
		if len(b) < stateHeader {
			return nil, fmt.Errorf("%w: %d bytes", ErrState, len(b))
		}
		c = binary.LittleEndian.Uint64(b)
		obs, act, tail := binary.LittleEndian.Uint32(b[8:]), binary.LittleEndian.Uint32(b[12:]), binary.LittleEndian.Uint32(b[16:])
		enc := sample.ObsEncoding(b[20])
		next, written = binary.LittleEndian.Uint64(b[21:]), int64(binary.LittleEndian.Uint64(b[29:]))
		if c != uint64(s.capacity) || obs != uint32(s.obsSize) || act != uint32(s.actSize) || tail != uint32(s.tail) || enc > sample.ObsBits {
			return nil, fmt.Errorf("%w: saved from a buffer of %d slots of observations %d (float tail %d, encoding %d) and actions %d, not %d of %d (%d) and %d",
				ErrState, c, obs, tail, enc, act, s.capacity, s.obsSize, s.tail, s.actSize)
		}
		src = newLayout(enc, s.obsSize, s.tail, s.actSize)
		b = b[stateHeader:]
	default:
		return nil, fmt.Errorf("%w: state version %d, want 1 or %d", ErrState, version, stateVersion)
	}
	used := int(min(next, c))
	if written < 0 || written > int64(next) || len(b) < used*src.slotBytes() {
		return nil, fmt.Errorf("%w: %d bytes for %d slots (next %d, written %d)", ErrState, len(b), used, next, written)
	}
	for i := range used {
		s.gen[i] = binary.LittleEndian.Uint64(b[8*i:])
		if s.gen[i] == 0 {
			return nil, fmt.Errorf("%w: slot %d below the reservation counter was never written", ErrState, i)
		}
	}
	b = b[8*used:]
	// The counters first: widen converts the slots below them.
	s.next.Store(next)
	s.written.Store(written)
	if version > 1 {
		s.widen(src.enc)
	}
	// Each saved record is read into src's words, then copied into the
	// storage's layout: as it is where the encodings agree, through a row
	// otherwise (widening the storage first where the row needs it;
	// version 2's rows fit, their encoding is at most as narrow).
	src.rec = make([]float32, src.stride)
	var row Batch
	row.Resize(1, s.obsSize, s.actSize)
	for slot := range used {
		r, words := src.rec, 0
		if src.enc != sample.ObsFloat32 {
			copy(src.headWordBytes(r), b)
			words = src.headWords
		}
		for k := words; k < src.stride; k++ {
			r[k] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*k:]))
		}
		b = b[4*src.stride:]
		if err := src.get(r, &row, 0); err != nil {
			return nil, fmt.Errorf("%w: slot %d: %w", ErrState, slot, err)
		}
		l := s.lay.Load()
		if l.enc == src.enc {
			copy(l.record(slot), r)
			continue
		}
		if l.enc != sample.ObsFloat32 {
			if need := s.encodingOf(&row, l.enc); need != l.enc {
				s.widen(need)
				l = s.lay.Load()
			}
		}
		l.put(l.record(slot), &row, 0)
	}
	return b, nil
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
	if len(b) < 2 || b[0] != stateUniform || b[1] < 1 || b[1] > stateVersion {
		return fmt.Errorf("%w: not a uniform buffer's state (version 1 to %d)", ErrState, stateVersion)
	}
	if u.cfg.Locking == GlobalLock {
		u.global.Lock()
		defer u.global.Unlock()
	}
	rest, err := u.st.loadState(b[2:], b[1])
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
	p.lockAll()
	defer p.unlockAll()
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
	if len(b) < 26 || b[0] != statePrioritized || b[1] < 1 || b[1] > stateVersion {
		return fmt.Errorf("%w: not a prioritized buffer's state (version 1 to %d)", ErrState, stateVersion)
	}
	maxP, beta := math.Float64frombits(binary.LittleEndian.Uint64(b[2:])), math.Float64frombits(binary.LittleEndian.Uint64(b[10:]))
	since := int64(binary.LittleEndian.Uint64(b[18:]))
	if !(maxP >= 0 && maxP <= p.maxRaw) || !(beta >= 0 && beta <= 1) || since < 0 {
		return fmt.Errorf("%w: maximum priority %v, β %v, %d writes since the rebuild", ErrState, maxP, beta, since)
	}
	p.lockAll()
	defer p.unlockAll()
	rest, err := p.st.loadState(b[26:], b[1])
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
