package env

import "herd/env/internal/core"

// Dict is Gymnasium's Dict space: subspaces ordered by key, an element
// encoded as their encodings concatenated in key order. Policies read
// FlattenSpace's Box (Make and FlatVector flatten a Dict observation).
type Dict = core.Dict

// NewDict returns the Dict of the given subspaces, ordered by key.
func NewDict(spaces map[string]Space) (Dict, error) { return core.NewDict(spaces) }

// FlattenSpace is Gymnasium's flatten_space: the flat Box FlattenTo
// writes (Discrete and MultiDiscrete values one-hot, a Dict's subspaces
// in key order). A space that cannot be flattened is ErrInvalidOption.
func FlattenSpace(s Space) (Box, error) { return core.FlattenSpace(s) }

// FlattenTo is Gymnasium's flatten(space, x): x, encoded in s's encoding,
// as FlattenSpace(s).Dim() values appended to dst[:0].
func FlattenTo(dst []float32, s Space, x []float32) []float32 { return core.FlattenTo(dst, s, x) }

// FlattenObservation is Gymnasium's FlattenObservation for a Dict
// observation space: observations become FlattenSpace's flat Box, which
// every herd policy reads. Make wraps an env whose observations are a Dict
// in it, innermost; DictSpaceOf finds the Dict again.
type FlattenObservation struct {
	inner Env
	dict  Space
	box   Box
	obs   []float32
}

// NewFlattenObservation wraps e; its observation space must flatten
// (FlattenSpace).
func NewFlattenObservation(e Env) (*FlattenObservation, error) {
	b, err := FlattenSpace(e.ObservationSpace())
	if err != nil {
		return nil, err
	}
	return &FlattenObservation{inner: e, dict: e.ObservationSpace(), box: b, obs: make([]float32, 0, b.Dim())}, nil
}

func (f *FlattenObservation) ObservationSpace() Space { return f.box }
func (f *FlattenObservation) ActionSpace() Space      { return f.inner.ActionSpace() }
func (f *FlattenObservation) Close() error            { return f.inner.Close() }
func (f *FlattenObservation) Unwrap() Env             { return f.inner }

// DictSpace is the wrapped env's observation space.
func (f *FlattenObservation) DictSpace() Space { return f.dict }

func (f *FlattenObservation) Reset(seed int64) ([]float32, Info, error) {
	o, info, err := f.inner.Reset(seed)
	if err != nil {
		return nil, info, err
	}
	f.obs = FlattenTo(f.obs, f.dict, o)
	return f.obs, info, nil
}

func (f *FlattenObservation) Step(action []float32) ([]float32, float64, bool, bool, Info, error) {
	o, r, term, trunc, info, err := f.inner.Step(action)
	if err != nil {
		return nil, r, term, trunc, info, err
	}
	f.obs = FlattenTo(f.obs, f.dict, o)
	return f.obs, r, term, trunc, info, nil
}

// DictSpaceOf returns the Dict observation space that e's observations
// were flattened from (a FlattenObservation among its wrappers, or a
// multi-agent TurnEnv one of whose agents observes a Dict), if any: for a
// check to say why a Dict cannot feed what expects an image.
func DictSpaceOf(e Env) (Space, bool) {
	for {
		switch w := e.(type) {
		case *FlattenObservation:
			return w.dict, true
		case *TurnEnv:
			return w.flat.dictSpace()
		}
		u, ok := e.(Wrapper)
		if !ok {
			return nil, false
		}
		e = u.Unwrap()
	}
}
