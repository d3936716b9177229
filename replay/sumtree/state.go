package sumtree

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// ErrState marks a saved tree state that is malformed or was taken from a
// tree of another capacity or fanout.
var ErrState = errors.New("sumtree: bad saved state")

// AppendState appends the tree's exact state to b: the fanout, the
// capacity, every leaf, then every inner node as it stands — with the
// rounding drift delta propagation has left in it, which Rebuild would
// remove — so that a tree restored by LoadState gives the same sums and
// the same draws as this one, bit for bit. The caller excludes writers.
func (t *Tree) AppendState(b []byte) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(t.k))
	b = binary.LittleEndian.AppendUint64(b, uint64(t.n))
	for _, v := range t.leaves {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	for l := range t.depth {
		for _, v := range t.levels[l][:t.counts[l]] {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
		}
	}
	return b
}

// StateSize is the length of AppendState's output.
func (t *Tree) StateSize() int {
	n := 12 + 4*t.n
	for l := range t.depth {
		n += 8 * t.counts[l]
	}
	return n
}

// LoadState restores a state AppendState wrote from the front of b into t,
// a tree of the same capacity and fanout, and returns the rest of b. The
// caller excludes readers and writers.
func (t *Tree) LoadState(b []byte) ([]byte, error) {
	if len(b) < 12 {
		return nil, fmt.Errorf("%w: %d bytes", ErrState, len(b))
	}
	k, n := int(binary.LittleEndian.Uint32(b)), binary.LittleEndian.Uint64(b[4:])
	if k != t.k || n != uint64(t.n) {
		return nil, fmt.Errorf("%w: saved from a tree of %d leaves and fanout %d, not %d and %d", ErrState, n, k, t.n, t.k)
	}
	if len(b) < t.StateSize() {
		return nil, fmt.Errorf("%w: %d bytes for a state of %d", ErrState, len(b), t.StateSize())
	}
	b = b[12:]
	for i := range t.leaves {
		v := math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		if !(v >= 0 && v <= MaxPriority) {
			return nil, fmt.Errorf("%w: leaf %d holds %v", ErrState, i, v)
		}
		t.leaves[i] = v
	}
	b = b[4*t.n:]
	for l := range t.depth {
		lv := t.levels[l]
		for i := range t.counts[l] {
			lv[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
		}
		b = b[8*t.counts[l]:]
	}
	return b, nil
}
