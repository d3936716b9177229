package persist

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
)

// Sampler is a plugin index over the store's keys. The Store calls it under
// its own lock, so an implementation needs no locking of its own, but each
// call must be short (it delays every Push, Get and Sample).
//
// Call order: Check (outside the lock, may reject a record), then BuildIndex
// on every Push (an upsert: the key may already be indexed), RemoveIndex on
// every Delete, Sample from Store.Sample. The fields passed to BuildIndex
// belong to the caller; keep only what Fields declares.
//
// A Sampler that also implements encoding.BinaryMarshaler and
// encoding.BinaryUnmarshaler has its state written into snapshots and read
// back on restore; otherwise the Store rebuilds it by calling BuildIndex for
// every stored record, in key order.
type Sampler interface {
	// Name identifies the sampler in Store.Sample and in snapshots.
	Name() string
	// Fields lists the record fields the sampler indexes.
	Fields() []string
	// Check rejects a record the sampler cannot index (a missing or
	// negative priority …). It must not keep fields.
	Check(fields map[string]float64) error
	// BuildIndex adds key, or updates it if already indexed.
	BuildIndex(key string, fields map[string]float64)
	// RemoveIndex drops key; absent keys are ignored.
	RemoveIndex(key string)
	// Sample appends up to n keys to dst[:0] and returns it, drawing from r.
	// An empty index gives an empty result.
	Sample(dst []string, n int, r *rand.Rand) []string
	// Len is the number of indexed keys.
	Len() int
}

// Uniform samples keys uniformly with replacement. Each draw is O(1): keys
// live in a dense slice, removal swaps the last key into the hole.
type Uniform struct {
	name string
	keys []string
	pos  map[string]int
}

// NewUniform returns an empty Uniform sampler called name.
func NewUniform(name string) *Uniform {
	return &Uniform{name: name, pos: map[string]int{}}
}

func (u *Uniform) Name() string                   { return u.name }
func (u *Uniform) Fields() []string               { return nil }
func (u *Uniform) Check(map[string]float64) error { return nil }
func (u *Uniform) Len() int                       { return len(u.keys) }
func (u *Uniform) BuildIndex(key string, _ map[string]float64) {
	if _, ok := u.pos[key]; ok {
		return
	}
	u.pos[key] = len(u.keys)
	u.keys = append(u.keys, key)
}

func (u *Uniform) RemoveIndex(key string) {
	i, ok := u.pos[key]
	if !ok {
		return
	}
	last := len(u.keys) - 1
	u.keys[i] = u.keys[last]
	u.pos[u.keys[i]] = i
	u.keys[last] = ""
	u.keys = u.keys[:last]
	delete(u.pos, key)
}

func (u *Uniform) Sample(dst []string, n int, r *rand.Rand) []string {
	dst = dst[:0]
	if len(u.keys) == 0 {
		return dst
	}
	for i := 0; i < n; i++ {
		dst = append(dst, u.keys[r.IntN(len(u.keys))])
	}
	return dst
}

// MarshalBinary writes the keys in slot order (format: uvarint count, then
// uvarint length + bytes per key), so a restored sampler draws the same
// keys from the same random stream.
func (u *Uniform) MarshalBinary() ([]byte, error) {
	buf := binary.AppendUvarint(nil, uint64(len(u.keys)))
	for _, k := range u.keys {
		buf = appendString(buf, k)
	}
	return buf, nil
}

// UnmarshalBinary replaces the state with one written by MarshalBinary.
func (u *Uniform) UnmarshalBinary(b []byte) error {
	d := decoder{b: b}
	n := d.uvarint()
	keys := make([]string, 0, min(n, uint64(len(b))))
	pos := map[string]int{}
	for i := uint64(0); i < n && d.err == nil; i++ {
		k := d.string()
		if _, dup := pos[k]; dup || k == "" {
			d.fail("key (empty or repeated)")
			break
		}
		pos[k] = len(keys)
		keys = append(keys, k)
	}
	if err := d.done(); err != nil {
		return fmt.Errorf("uniform sampler %q: %w", u.name, err)
	}
	u.keys, u.pos = keys, pos
	return nil
}

func appendString(buf []byte, s string) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(s)))
	return append(buf, s...)
}

// decoder reads the little binary formats of this package and remembers
// the first error, which always wraps ErrCorrupt.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: truncated or bad %s", ErrCorrupt, what)
	}
	d.b = nil
}

func (d *decoder) uvarint() uint64 {
	v, k := binary.Uvarint(d.b)
	if k <= 0 {
		d.fail("varint")
		return 0
	}
	d.b = d.b[k:]
	return v
}

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail("length")
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) string() string { return string(d.bytes()) }

func (d *decoder) u64() uint64 {
	if len(d.b) < 8 {
		d.fail("u64")
		return 0
	}
	v := binary.LittleEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

func (d *decoder) done() error {
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%w: %d trailing bytes", ErrCorrupt, len(d.b))
	}
	return d.err
}
