package kernel

import (
	"math"
	"testing"

	"herd/internal/rng"
)

// TestAddBiasSameBits: every path gives Go's x + b and max(x + b, 0) bit
// for bit, also on NaN, ±0 and sums that round to −0, at lengths with and
// without a tail.
func TestAddBiasSameBits(t *testing.T) {
	r := rng.New(5, "kernel/test", 0)
	negZero := float32(math.Copysign(0, -1))
	nan := float32(math.NaN())
	for _, n := range []int{0, 1, 7, 8, 9, 33, 64} {
		for _, b := range []float32{0, negZero, 0.25, -1.5} {
			x := randSlice(r, n)
			specials := []float32{nan, negZero, 0, -b, float32(math.Inf(-1)), float32(math.Inf(1))}
			for i := 0; i < n && i < len(specials); i++ {
				x[(i*5)%n] = specials[i]
			}
			for _, relu := range []bool{false, true} {
				want := make([]float32, n)
				for i, v := range x {
					s := v + b
					if relu {
						s = max(s, 0)
					}
					want[i] = s
				}
				for _, path := range Levels() {
					got := append([]float32(nil), x...)
					addBiasOn(path, got, b, relu)
					for i := range got {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("n=%d b=%v relu=%v path=%v: x[%d]=%v → %v, want %v", n, b, relu, path, i, x[i], got[i], want[i])
						}
					}
				}
			}
		}
	}
}
