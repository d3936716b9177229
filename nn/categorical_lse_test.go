package nn

import (
	"math"
	"testing"

	"herd/internal/rng"
)

// TestLSESkipsNoBits: lse, which adds 1 for the maximum's term instead of
// calling exp(0), gives the bits of the sum with every term's exp, ties
// and a NaN row included.
func TestLSESkipsNoBits(t *testing.T) {
	r := rng.New(1, "nn/lse", 0)
	rows := [][]float32{{0, 0}, {3, 3, -1}, {-2}, {float32(math.NaN()), 1}, {1e-9, 0}}
	for range 1000 {
		z := make([]float32, 1+r.IntN(6))
		for j := range z {
			z[j] = float32(r.NormFloat64() * 5)
		}
		rows = append(rows, z)
	}
	for _, z := range rows {
		mx := math.Inf(-1)
		for _, v := range z {
			mx = math.Max(mx, float64(v))
		}
		var s float64
		for _, v := range z {
			s += math.Exp(float64(v) - mx)
		}
		gotMx, gotLs := lse(z)
		if math.Float64bits(gotMx) != math.Float64bits(mx) || math.Float64bits(gotLs) != math.Float64bits(math.Log(s)) {
			t.Fatalf("lse(%v) = %v, %v; want %v, %v", z, gotMx, gotLs, mx, math.Log(s))
		}
	}
}
