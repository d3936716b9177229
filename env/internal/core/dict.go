package core

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
)

// Dict is Gymnasium's Dict space: named subspaces, ordered by key (as
// gymnasium.spaces.Dict orders a dict given to it). An element is encoded
// as its subspaces' encodings concatenated in key order (a Discrete value
// as its one integer), so Dim is the sum of their Dims. Policies read
// FlattenSpace's Box instead, which is what Gymnasium's FlattenObservation
// makes of it (Discrete values one-hot).
type Dict struct {
	Keys   []string
	Spaces []Space // Spaces[i] is Keys[i]'s
}

// NewDict returns the Dict of the given subspaces, ordered by key.
func NewDict(spaces map[string]Space) (Dict, error) {
	if len(spaces) == 0 {
		return Dict{}, fmt.Errorf("%w: a Dict space needs at least one subspace", ErrInvalidOption)
	}
	d := Dict{}
	for k := range spaces {
		d.Keys = append(d.Keys, k)
	}
	slices.Sort(d.Keys)
	for _, k := range d.Keys {
		if spaces[k] == nil {
			return Dict{}, fmt.Errorf("%w: Dict subspace %q is nil", ErrInvalidOption, k)
		}
		d.Spaces = append(d.Spaces, spaces[k])
	}
	return d, nil
}

// Dim is the sum of the subspaces' Dims.
func (d Dict) Dim() int {
	n := 0
	for _, s := range d.Spaces {
		n += s.Dim()
	}
	return n
}

// Shape is nil: a Dict has no shape (Gymnasium's Dict.shape is None).
func (d Dict) Shape() []int { return nil }

func (d Dict) String() string {
	var b strings.Builder
	b.WriteString("Dict(")
	for i, k := range d.Keys {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s: %v", k, d.Spaces[i])
	}
	b.WriteString(")")
	return b.String()
}

// Contains reports whether x has Dim values and each subspace's part is
// in that subspace.
func (d Dict) Contains(x []float32) bool {
	if len(x) != d.Dim() {
		return false
	}
	for _, s := range d.Spaces {
		n := s.Dim()
		if !s.Contains(x[:n]) {
			return false
		}
		x = x[n:]
	}
	return true
}

// SampleTo samples each subspace in key order.
func (d Dict) SampleTo(dst []float32, r *rand.Rand) []float32 {
	dst = dst[:0]
	var part []float32
	for _, s := range d.Spaces {
		part = s.SampleTo(part, r)
		dst = append(dst, part...)
	}
	return dst
}

// FlattenSpace is Gymnasium's flatten_space: a flat Box whose elements
// are FlattenTo's. A Box is itself (flat); a Discrete(n) is n values in
// [0, 1] (one-hot), a MultiDiscrete the one-hots of its dimensions
// concatenated; a Dict its subspaces' flattened in key order.
func FlattenSpace(s Space) (Box, error) {
	var low, high []float32
	var add func(s Space) error
	add = func(s Space) error {
		switch sp := s.(type) {
		case Box:
			low, high = append(low, sp.Low...), append(high, sp.High...)
		case Discrete:
			for range sp.N {
				low, high = append(low, 0), append(high, 1)
			}
		case MultiDiscrete:
			for _, n := range sp.Nvec {
				for range n {
					low, high = append(low, 0), append(high, 1)
				}
			}
		case Dict:
			for _, sub := range sp.Spaces {
				if err := add(sub); err != nil {
					return err
				}
			}
		default:
			return fmt.Errorf("%w: space %v cannot be flattened", ErrInvalidOption, s)
		}
		return nil
	}
	if err := add(s); err != nil {
		return Box{}, err
	}
	return Box{Low: low, High: high}, nil
}

// FlattenTo is Gymnasium's flatten(space, x) for x encoded in s's
// encoding: it appends to dst[:0] FlattenSpace(s).Dim() values and returns
// them. A Discrete value is one-hot (index x − Start); a value out of
// range gives all zeros rather than a panic (the env's Contains is the
// check).
func FlattenTo(dst []float32, s Space, x []float32) []float32 {
	return flattenAppend(dst[:0], s, x)
}

func flattenAppend(dst []float32, s Space, x []float32) []float32 {
	oneHot := func(dst []float32, n int, v float32, start int) []float32 {
		i := -1
		if f := float64(v) - float64(start); f == math.Trunc(f) && f >= 0 && f < float64(n) {
			i = int(f)
		}
		for k := range n {
			if k == i {
				dst = append(dst, 1)
			} else {
				dst = append(dst, 0)
			}
		}
		return dst
	}
	switch sp := s.(type) {
	case Box:
		return append(dst, x[:sp.Dim()]...)
	case Discrete:
		return oneHot(dst, sp.N, x[0], sp.Start)
	case MultiDiscrete:
		for i, n := range sp.Nvec {
			dst = oneHot(dst, n, x[i], 0)
		}
		return dst
	case Dict:
		for _, sub := range sp.Spaces {
			n := sub.Dim()
			dst = flattenAppend(dst, sub, x[:n])
			x = x[n:]
		}
		return dst
	}
	return append(dst, x...)
}
