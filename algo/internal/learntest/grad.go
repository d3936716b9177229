package learntest

import (
	"math"
	"testing"

	"herd/nn"
)

// Finite-difference helpers for the algorithms' loss gradients, in the
// manner of nn's own gradient tests: the analytical gradient (float32, as
// the learner computes it) is compared with central differences of an
// independent float64 reference of the loss, so the check measures the
// gradient's error and not finite-difference noise.

// GradTol is the largest relative error ‖g − ĝ‖ / max(‖g‖, ‖ĝ‖) accepted.
const GradTol = 1e-3

// CheckGrad fails t when got (the analytical gradient) and want (the
// numerical one) differ by more than GradTol in relative norm, or when
// want is all zero (a check that cannot fail).
func CheckGrad(t testing.TB, what string, got []float32, want []float64) {
	t.Helper()
	var d, ng, nw float64
	for i := range got {
		e := float64(got[i]) - want[i]
		d += e * e
		ng += float64(got[i]) * float64(got[i])
		nw += want[i] * want[i]
	}
	if nw == 0 {
		t.Errorf("%s: the numerical gradient is zero; the check cannot fail", what)
		return
	}
	if e := math.Sqrt(d) / math.Sqrt(max(ng, nw)); !(e <= GradTol) {
		t.Errorf("%s: relative error %.3g > %g\n got %v\nwant %v", what, e, GradTol, got, want)
	}
}

// NumGrad returns dL/dx by central differences of the float64 function f
// around x (x is restored).
func NumGrad(x []float64, f func() float64) []float64 {
	g := make([]float64, len(x))
	for i := range x {
		h := 1e-6 * max(1, math.Abs(x[i]))
		old := x[i]
		x[i] = old + h
		fp := f()
		x[i] = old - h
		fm := f()
		x[i] = old
		g[i] = (fp - fm) / (2 * h)
	}
	return g
}

// To64 converts s to float64.
func To64(s []float32) []float64 {
	o := make([]float64, len(s))
	for i, v := range s {
		o[i] = float64(v)
	}
	return o
}

// MLP64 is a float64 copy of an MLP with ReLU hidden layers and an
// identity output (the off-policy networks), for reference losses.
type MLP64 struct {
	Sizes []int
	// P holds each parameter's values in m.Params() order: weights laid
	// out [in][out] (nn's Transposed layout), then biases.
	P [][]float64
}

// NewMLP64 copies m's parameters.
func NewMLP64(m *nn.MLP) *MLP64 {
	c := m.Config()
	r := &MLP64{Sizes: append(append([]int{c.In}, c.Hidden...), c.Out)}
	for _, p := range m.Params() {
		r.P = append(r.P, To64(p.Value))
	}
	return r
}

// Forward returns the batch×Out outputs for x (batch×In).
func (m *MLP64) Forward(x []float64, batch int) []float64 {
	cur := x
	L := len(m.Sizes) - 1
	for l := range L {
		in, out := m.Sizes[l], m.Sizes[l+1]
		w, b := m.P[2*l], m.P[2*l+1]
		nxt := make([]float64, batch*out)
		for r := range batch {
			for o := range out {
				s := b[o]
				for i := range in {
					s += cur[r*in+i] * w[i*out+o]
				}
				if l < L-1 {
					s = max(s, 0)
				}
				nxt[r*out+o] = s
			}
		}
		cur = nxt
	}
	return cur
}

// Critic64 returns Q(s, a) of a critic copied into m for batch rows.
func Critic64(m *MLP64, obs, act []float64, obsDim, actDim, batch int) []float64 {
	x := make([]float64, 0, batch*(obsDim+actDim))
	for r := range batch {
		x = append(x, obs[r*obsDim:(r+1)*obsDim]...)
		x = append(x, act[r*actDim:(r+1)*actDim]...)
	}
	return m.Forward(x, batch)
}
