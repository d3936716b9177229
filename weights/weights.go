package weights

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"strconv"
	"sync"
	"sync/atomic"

	"herd/nn"
)

// Errors of this package.
var (
	// ErrStale is returned by Store.Publish for a version number that is
	// not greater than the latest one.
	ErrStale = errors.New("weights: version does not advance")
	// ErrMismatch is returned when a version's parameters do not match the
	// model they are copied into (names, count or sizes).
	ErrMismatch = errors.New("weights: parameters do not match")
	// ErrCorrupt wraps every decoding failure of Decode.
	ErrCorrupt = errors.New("weights: corrupt encoding")
)

// versionKey is the safetensors metadata key that carries Version.N.
const versionKey = "herd.weights.version"

// Version is an immutable snapshot of a model's parameters.
type Version struct {
	// N numbers the version; a learner's versions are 0 (the initial
	// weights), 1, 2, … in the order they were made.
	N uint64
	// params are deep copies (Grad nil). Never written after New.
	params []*nn.Param
}

// New snapshots params (values only) as version n.
func New(n uint64, params []*nn.Param) *Version {
	v := &Version{N: n, params: make([]*nn.Param, len(params))}
	for i, p := range params {
		v.params[i] = &nn.Param{Name: p.Name, Shape: append([]int(nil), p.Shape...),
			Transposed: p.Transposed, Value: append([]float32(nil), p.Value...)}
	}
	return v
}

// Len returns the number of parameter tensors.
func (v *Version) Len() int { return len(v.params) }

// Param returns the i-th parameter. Its Value must not be modified.
func (v *Version) Param(i int) *nn.Param { return v.params[i] }

// CopyTo copies the version's values into dst, which must list the same
// parameters in the same order (the model the version was taken from, or
// one built from the same config).
func (v *Version) CopyTo(dst []*nn.Param) error {
	if len(dst) != len(v.params) {
		return fmt.Errorf("%w: version %d has %d tensors, model has %d", ErrMismatch, v.N, len(v.params), len(dst))
	}
	for i, p := range dst {
		s := v.params[i]
		if p.Name != s.Name || len(p.Value) != len(s.Value) || p.Transposed != s.Transposed {
			return fmt.Errorf("%w: tensor %d is %q (%d values), model wants %q (%d values)",
				ErrMismatch, i, s.Name, len(s.Value), p.Name, len(p.Value))
		}
	}
	for i, p := range dst {
		copy(p.Value, v.params[i].Value)
	}
	return nil
}

// Hash is an FNV-1a hash of the parameters' values, bit for bit, in
// order: two versions with the same parameters have the same hash, and the
// learners of a group compare theirs to check they stay identical.
func (v *Version) Hash() uint64 {
	h := fnv.New64a()
	var b []byte
	for _, p := range v.params {
		b = b[:0]
		for _, x := range p.Value {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
		}
		_, _ = h.Write(b)
	}
	return h.Sum64()
}

// Encode returns the version as safetensors bytes (PyTorch layout) with the
// version number in the metadata.
func (v *Version) Encode() ([]byte, error) {
	var b bytes.Buffer
	md := map[string]string{versionKey: strconv.FormatUint(v.N, 10)}
	if err := nn.Save(&b, v.params, md); err != nil {
		return nil, fmt.Errorf("weights: encode version %d: %w", v.N, err)
	}
	return b.Bytes(), nil
}

// Decode reads bytes written by Encode into a new Version shaped like
// like (the parameters of a model built from the run config). Bad bytes
// give an error wrapping ErrCorrupt (or ErrMismatch when they decode but
// describe another model); they never panic, and nothing larger than the
// input is allocated.
func Decode(b []byte, like []*nn.Param) (*Version, error) {
	ps := make([]*nn.Param, len(like))
	for i, p := range like {
		ps[i] = &nn.Param{Name: p.Name, Shape: append([]int(nil), p.Shape...),
			Transposed: p.Transposed, Value: make([]float32, len(p.Value))}
	}
	md, err := nn.Load(bytes.NewReader(b), ps)
	if err != nil {
		if errors.Is(err, nn.ErrCorrupt) {
			return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
		}
		return nil, fmt.Errorf("%w: %w", ErrMismatch, err)
	}
	s, ok := md[versionKey]
	if !ok {
		return nil, fmt.Errorf("%w: no %s in the metadata", ErrCorrupt, versionKey)
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("%w: %s %q: %v", ErrCorrupt, versionKey, s, err)
	}
	return &Version{N: n, params: ps}, nil
}

// Store is the in-process parameter service: the latest version behind an
// atomic pointer. Safe for concurrent use.
type Store struct {
	cur atomic.Pointer[Version]

	mu      sync.Mutex
	changed chan struct{} // closed and replaced by each Publish
}

// NewStore returns a store whose latest version is v0 (not nil).
func NewStore(v0 *Version) *Store {
	s := &Store{changed: make(chan struct{})}
	s.cur.Store(v0)
	return s
}

// Latest returns the newest published version without blocking.
func (s *Store) Latest() *Version { return s.cur.Load() }

// Publish makes v the latest version. v.N must be greater than the latest
// version's number (ErrStale otherwise), so readers only ever move forward.
func (s *Store) Publish(v *Version) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.cur.Load(); v.N <= old.N {
		return fmt.Errorf("%w: publishing %d after %d", ErrStale, v.N, old.N)
	}
	s.cur.Store(v)
	close(s.changed)
	s.changed = make(chan struct{})
	return nil
}

// Wait returns the latest version once its number is at least n, parking
// until then; it returns ctx's error if ctx ends first.
func (s *Store) Wait(ctx context.Context, n uint64) (*Version, error) {
	for {
		s.mu.Lock()
		v, ch := s.cur.Load(), s.changed
		s.mu.Unlock()
		if v.N >= n {
			return v, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
