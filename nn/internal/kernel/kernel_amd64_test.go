//go:build amd64 && !purego

package kernel

import (
	"math"
	"testing"
	"unsafe"

	"herd/internal/rng"
)

// TestSmallKSameBits: the k ≤ 8 kernel gives the 4×16 tiles' bits for
// every row count, width (whole 8-column strips and a masked tail), k and
// flag combination, with signed zeros in the inputs, and leaves C's
// padding columns alone.
func TestSmallKSameBits(t *testing.T) {
	if maxLevel < AVX2FMA {
		t.Skip("no AVX2/FMA")
	}
	r := rng.New(11, "kernel/test", 0)
	zeroed := func(s []float32) []float32 { return withZeros(r, s) }
	for _, m := range []int{1, 2, 3, 4, 5, 8, 19, 256} {
		for _, n := range []int{9, 15, 16, 17, 24, 64, 70, 120} {
			for k := 1; k <= smallK; k++ {
				for mode := 0; mode < 8; mode++ {
					acc, relu, withBias := mode&1 != 0, mode&2 != 0, mode&4 != 0
					if acc && withBias {
						continue
					}
					flags := 0
					if acc {
						flags |= 1
					}
					if relu {
						flags |= 2
					}
					lda, ldb, ldc := k+1, n+3, n+2
					a, b := zeroed(randSlice(r, m*lda)), zeroed(randSlice(r, k*ldb))
					var bias []float32
					if withBias {
						bias = zeroed(randSlice(r, n))
					}
					c := zeroed(randSlice(r, m*ldc))
					want := append([]float32(nil), c...)
					base := unsafe.Pointer(&a[0])
					gemmSmallK(base, lda, m, n, k, b, ldb, c, ldc, bias, flags)
					gemmTiles(base, lda, 1, m, n, k, a, b, ldb, want, ldc, bias, flags)
					for i := range c {
						if math.Float32bits(c[i]) != math.Float32bits(want[i]) {
							t.Fatalf("m=%d n=%d k=%d mode=%d: C[%d] = %v, 4×16 tiles %v", m, n, k, mode, i, c[i], want[i])
						}
					}
				}
			}
		}
	}
}
