package offpolicy

import (
	"math"
	"testing"
)

func TestPolyak(t *testing.T) {
	dst := []float32{0, 10, -4}
	Polyak(dst, []float32{1, 0, 4}, 0.25)
	want := []float32{0.25, 7.5, -2}
	for i := range want {
		if math.Abs(float64(dst[i]-want[i])) > 1e-6 {
			t.Errorf("Polyak τ=0.25: dst[%d] = %v, want %v", i, dst[i], want[i])
		}
	}
	Polyak(dst, []float32{1, 2, 3}, 1)
	if dst[0] != 1 || dst[1] != 2 || dst[2] != 3 {
		t.Errorf("Polyak τ=1 is not a hard copy: %v", dst)
	}
}
