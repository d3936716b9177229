package onpolicy

import (
	"math"
	"testing"
)

// TestTanhAccuracy checks the fast tanh against math.Tanh on a dense grid
// and at the edges (the naive version it must agree with).
func TestTanhAccuracy(t *testing.T) {
	var worst float64
	check := func(x float32) {
		got := float64(tanh32(x))
		want := math.Tanh(float64(x))
		if d := math.Abs(got - want); d > worst {
			worst = d
		}
		if (x > 0 && got < 0) || (x < 0 && got > 0) || math.Abs(got) > 1 {
			t.Fatalf("tanh(%v) = %v", x, got)
		}
	}
	for x := -25.0; x <= 25; x += 1e-4 {
		check(float32(x))
	}
	for _, x := range []float32{0, -0, 1e-30, -1e-30, 1e-8, 3.4e38, -3.4e38, float32(math.Inf(1)), float32(math.Inf(-1))} {
		check(x)
	}
	// One float32 ulp at 1 is 6e-8: 1.2e-7 is two ulps, well inside what
	// float32 GEMMs already lose.
	t.Logf("max abs error %g", worst)
	if worst > 1.2e-7 {
		t.Fatalf("max abs error %g", worst)
	}
	if tanh32(float32(math.Inf(1))) != 1 || tanh32(0) != 0 {
		t.Fatal("edge values")
	}
}

func BenchmarkTanh(b *testing.B) {
	x := make([]float32, 4096)
	for i := range x {
		x[i] = float32(i-2048) / 512
	}
	dst := make([]float32, len(x))
	b.ReportAllocs()
	b.SetBytes(int64(4 * len(x)))
	for b.Loop() {
		tanhTo(dst, x)
	}
}

func BenchmarkMathTanh(b *testing.B) {
	x := make([]float32, 4096)
	for i := range x {
		x[i] = float32(i-2048) / 512
	}
	dst := make([]float32, len(x))
	b.SetBytes(int64(4 * len(x)))
	for b.Loop() {
		for i, v := range x {
			dst[i] = float32(math.Tanh(float64(v)))
		}
	}
}
