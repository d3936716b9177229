package offpolicy

import (
	"math"
	"testing"

	"herd/internal/rng"
)

// TestOUIsCorrelated: OU noise has lag-1 autocorrelation close to
// 1 − θ·dt, while its stationary std is about σ·√(dt/(2θ·dt)) = σ/√(2θ).
func TestOUIsCorrelated(t *testing.T) {
	o := NewOU(1, 0.5)
	r := rng.New(1, "test/ou", 0)
	const n = 200000
	xs := make([]float64, n)
	for i := range xs {
		o.Sample(r)
		xs[i] = o.X[0]
	}
	var m, v, c float64
	for _, x := range xs[n/10:] {
		m += x
	}
	m /= float64(n - n/10)
	for i := n / 10; i < n; i++ {
		v += (xs[i] - m) * (xs[i] - m)
		c += (xs[i] - m) * (xs[i-1] - m)
	}
	rho, std := c/v, math.Sqrt(v/float64(n-n/10))
	if math.Abs(rho-(1-0.15*0.01)) > 0.002 {
		t.Errorf("lag-1 autocorrelation %.4f, want ≈ %.4f", rho, 1-0.15*0.01)
	}
	if want := 0.5 / math.Sqrt(2*0.15); math.Abs(std-want) > 0.15*want {
		t.Errorf("stationary std %.3f, want ≈ %.3f", std, want)
	}
	o.Reset(0, 1)
	if o.X[0] != 0 {
		t.Errorf("Reset left %v", o.X[0])
	}
}
