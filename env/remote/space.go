package remote

import (
	"fmt"
	"herd/env"
	"math"

	herdv1 "herd/proto/herd/v1"
)

// SpaceToProto describes s on the wire (proto/herd/v1 Space).
func SpaceToProto(s env.Space) (*herdv1.Space, error) {
	switch sp := s.(type) {
	case env.Discrete:
		return &herdv1.Space{Kind: &herdv1.Space_Discrete{Discrete: &herdv1.Discrete{N: int64(sp.N), Start: int64(sp.Start)}}}, nil
	case env.Box:
		shape := make([]int64, 0, len(sp.Shape()))
		for _, d := range sp.Shape() {
			shape = append(shape, int64(d))
		}
		return &herdv1.Space{Kind: &herdv1.Space_Box{Box: &herdv1.Box{Low: sp.Low, High: sp.High, Shape: shape}}}, nil
	case env.MultiDiscrete:
		nvec := make([]int64, len(sp.Nvec))
		for i, n := range sp.Nvec {
			nvec[i] = int64(n)
		}
		return &herdv1.Space{Kind: &herdv1.Space_MultiDiscrete{MultiDiscrete: &herdv1.MultiDiscrete{Nvec: nvec}}}, nil
	}
	return nil, fmt.Errorf("%w: space %v has no wire form", env.ErrInvalidOption, s)
}

// maxWireDim bounds the size of a space read from the wire, so that a
// malformed description cannot make the client allocate without limit.
const maxWireDim = 1 << 24

// SpaceFromProto checks and decodes a wire space; a malformed one is an
// error wrapping ErrInvalidOption.
func SpaceFromProto(p *herdv1.Space) (env.Space, error) {
	bad := func(format string, args ...any) (env.Space, error) {
		return nil, fmt.Errorf("%w: wire space: "+format, append([]any{env.ErrInvalidOption}, args...)...)
	}
	switch k := p.GetKind().(type) {
	case *herdv1.Space_Discrete:
		n, start := k.Discrete.GetN(), k.Discrete.GetStart()
		if n <= 0 || n > maxWireDim || start < -maxWireDim || start > maxWireDim {
			return bad("Discrete(%d, start=%d) out of range", n, start)
		}
		return env.Discrete{N: int(n), Start: int(start)}, nil
	case *herdv1.Space_Box:
		b := k.Box
		if len(b.GetLow()) == 0 || len(b.GetLow()) > maxWireDim {
			return bad("Box with %d values", len(b.GetLow()))
		}
		var shape []int
		n := int64(1)
		for _, d := range b.GetShape() {
			if d <= 0 || d > maxWireDim {
				return bad("Box shape %v", b.GetShape())
			}
			n *= d
			if n > maxWireDim {
				return bad("Box shape %v", b.GetShape())
			}
			shape = append(shape, int(d))
		}
		if len(shape) == 1 {
			shape = nil // the flat shape, as herd's own envs say it
		}
		box, err := env.NewBox(b.GetLow(), b.GetHigh(), shape...)
		if err != nil {
			return bad("%v", err)
		}
		return box, nil
	case *herdv1.Space_MultiDiscrete:
		nv := k.MultiDiscrete.GetNvec()
		if len(nv) == 0 || len(nv) > maxWireDim {
			return bad("MultiDiscrete with %d dimensions", len(nv))
		}
		nvec := make([]int, len(nv))
		for i, n := range nv {
			if n <= 0 || n > math.MaxInt32 {
				return bad("MultiDiscrete nvec[%d] = %d", i, n)
			}
			nvec[i] = int(n)
		}
		return env.MultiDiscrete{Nvec: nvec}, nil
	}
	return bad("no kind set")
}
