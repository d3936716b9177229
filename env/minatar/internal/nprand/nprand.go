// Package nprand is a random stream that draws exactly what NumPy's legacy
// numpy.random.RandomState draws for the few methods MinAtar uses: seeding
// with an integer (or an array of 32-bit words), rand() and randint().
//
// RandomState is MT19937 (Matsumoto & Nishimura 1998). An integer seed s in
// [0, 2³²) initialises the state with MT19937's init_genrand(s), as
// RandomState(s) does; NewArray initialises it with init_by_array, as
// RandomState(key) does for an array of two or more 32-bit words. Rand is NumPy's
// random_sample: two 32-bit outputs a, b give ((a>>5)·2²⁶ + (b>>6)) / 2⁵³.
// Randint(low, high) is RandomState.randint(low, high) for the default
// int64 dtype: with r = high − low − 1, r = 0 returns low without a draw;
// r < 2³² − 1 draws 32-bit outputs masked to the smallest all-ones mask ≥ r
// and rejects those above r; r = 2³² − 1 takes one 32-bit output as is;
// a larger r draws 64-bit values (the first 32-bit output is the high
// word), masked and rejected the same way.
//
// The tests replay tables NumPy itself wrote (testdata/gen_randomstate.py).
package nprand

import (
	"encoding/binary"
	"fmt"
)

const (
	n         = 624
	m         = 397
	matrixA   = 0x9908b0df
	upperMask = 0x80000000
	lowerMask = 0x7fffffff
)

// RandomState is one MT19937 stream. The zero value is not seeded; use New
// or NewArray. Not safe for concurrent use.
type RandomState struct {
	mt  [n]uint32
	pos int
}

// New returns the stream of RandomState(seed).
func New(seed uint32) *RandomState {
	r := &RandomState{}
	r.Seed(seed)
	return r
}

// NewArray returns the stream of init_by_array(key), which is
// RandomState(key) for a key of two or more 32-bit words (NumPy squeezes a
// one-word array to an integer seed and uses init_genrand).
func NewArray(key []uint32) *RandomState {
	r := &RandomState{}
	r.SeedArray(key)
	return r
}

// Seed reinitialises the stream as RandomState(seed) (init_genrand).
func (r *RandomState) Seed(seed uint32) {
	r.initGenrand(seed)
	r.pos = n
}

func (r *RandomState) initGenrand(seed uint32) {
	r.mt[0] = seed
	for i := 1; i < n; i++ {
		prev := r.mt[i-1]
		r.mt[i] = 1812433253*(prev^(prev>>30)) + uint32(i)
	}
}

// SeedArray reinitialises the stream as RandomState(key) (init_by_array);
// an empty key is treated as {0}.
func (r *RandomState) SeedArray(key []uint32) {
	if len(key) == 0 {
		key = []uint32{0}
	}
	r.initGenrand(19650218)
	i, j := 1, 0
	for k := max(n, len(key)); k > 0; k-- {
		prev := r.mt[i-1]
		r.mt[i] = (r.mt[i] ^ ((prev ^ (prev >> 30)) * 1664525)) + key[j] + uint32(j)
		i++
		j++
		if i >= n {
			r.mt[0] = r.mt[n-1]
			i = 1
		}
		if j >= len(key) {
			j = 0
		}
	}
	for k := n - 1; k > 0; k-- {
		prev := r.mt[i-1]
		r.mt[i] = (r.mt[i] ^ ((prev ^ (prev >> 30)) * 1566083941)) - uint32(i)
		i++
		if i >= n {
			r.mt[0] = r.mt[n-1]
			i = 1
		}
	}
	r.mt[0] = 0x80000000
	r.pos = n
}

// generate refills the state with the next 624 words.
func (r *RandomState) generate() {
	mt := &r.mt
	var k int
	for k = 0; k < n-m; k++ {
		y := mt[k]&upperMask | mt[k+1]&lowerMask
		mt[k] = mt[k+m] ^ y>>1 ^ -(y&1)&matrixA
	}
	for ; k < n-1; k++ {
		y := mt[k]&upperMask | mt[k+1]&lowerMask
		mt[k] = mt[k+m-n] ^ y>>1 ^ -(y&1)&matrixA
	}
	y := mt[n-1]&upperMask | mt[0]&lowerMask
	mt[n-1] = mt[m-1] ^ y>>1 ^ -(y&1)&matrixA
	r.pos = 0
}

// Uint32 is the next 32-bit output of MT19937.
func (r *RandomState) Uint32() uint32 {
	if r.pos >= n {
		r.generate()
	}
	y := r.mt[r.pos]
	r.pos++
	y ^= y >> 11
	y ^= y << 7 & 0x9d2c5680
	y ^= y << 15 & 0xefc60000
	y ^= y >> 18
	return y
}

// Rand is RandomState.rand(): a double in [0, 1) from two 32-bit outputs.
func (r *RandomState) Rand() float64 {
	a, b := r.Uint32()>>5, r.Uint32()>>6
	return (float64(a)*67108864.0 + float64(b)) / 9007199254740992.0
}

// Randint is RandomState.randint(low, high): an integer in [low, high).
// It requires low < high (NumPy raises ValueError otherwise; every caller
// here passes a non-empty range).
func (r *RandomState) Randint(low, high int64) int64 {
	if low >= high {
		panic("nprand: Randint with low >= high")
	}
	rng := uint64(high) - uint64(low) - 1
	off := uint64(low)
	switch {
	case rng == 0:
		return low
	case rng < 0xFFFFFFFF:
		mask := uint32(smallestMask(rng))
		for {
			v := r.Uint32() & mask
			if uint64(v) <= rng {
				return int64(off + uint64(v))
			}
		}
	case rng == 0xFFFFFFFF:
		return int64(off + uint64(r.Uint32()))
	default:
		mask := smallestMask(rng)
		for {
			hi := uint64(r.Uint32())
			v := (hi<<32 | uint64(r.Uint32())) & mask
			if v <= rng {
				return int64(off + v)
			}
		}
	}
}

// smallestMask is the smallest 2^k − 1 ≥ v.
func smallestMask(v uint64) uint64 {
	v |= v >> 1
	v |= v >> 2
	v |= v >> 4
	v |= v >> 8
	v |= v >> 16
	v |= v >> 32
	return v
}

// StateLen is the length of MarshalBinary's encoding: the 624 words of the
// state and the position in it.
const StateLen = 4*n + 2

// MarshalBinary returns the stream's whole state.
func (r *RandomState) MarshalBinary() ([]byte, error) {
	b := make([]byte, 0, StateLen)
	for _, w := range r.mt {
		b = binary.LittleEndian.AppendUint32(b, w)
	}
	return binary.LittleEndian.AppendUint16(b, uint16(r.pos)), nil
}

// UnmarshalBinary restores a state MarshalBinary returned.
func (r *RandomState) UnmarshalBinary(b []byte) error {
	if len(b) != StateLen {
		return fmt.Errorf("nprand: a state of %d bytes, want %d", len(b), StateLen)
	}
	pos := int(binary.LittleEndian.Uint16(b[4*n:]))
	if pos > n {
		return fmt.Errorf("nprand: a state at position %d of %d", pos, n)
	}
	for i := range r.mt {
		r.mt[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	r.pos = pos
	return nil
}
