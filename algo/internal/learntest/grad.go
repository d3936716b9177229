package learntest

import (
	"math"
	"testing"
)

// GradTol is the relative error CheckGrad accepts, as nn's gradient tests.
const GradTol = 1e-3

// NumGrad returns dL/dx by central differences of the float64 function f
// around x (x is restored). f reads x.
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

// CheckGrad reports an error when the float32 gradient got differs from
// want by more than GradTol in relative norm ‖got − want‖ / max(‖got‖, ‖want‖).
func CheckGrad(t *testing.T, what string, got []float32, want []float64) {
	t.Helper()
	var d, ng, nw float64
	for i := range got {
		e := float64(got[i]) - want[i]
		d += e * e
		ng += float64(got[i]) * float64(got[i])
		nw += want[i] * want[i]
	}
	e := 0.0
	if den := math.Sqrt(max(ng, nw)); den > 0 {
		e = math.Sqrt(d) / den
	}
	if !(e <= GradTol) || len(got) != len(want) {
		t.Errorf("%s: relative error %.3g > %g (%d vs %d values)", what, e, GradTol, len(got), len(want))
	}
}

// To64 converts to float64.
func To64(s []float32) []float64 {
	o := make([]float64, len(s))
	for i, v := range s {
		o[i] = float64(v)
	}
	return o
}
