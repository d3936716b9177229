package kernel

import (
	"math"
	"testing"

	"herd/internal/rng"
)

// TestSumSquaresSameBits checks every path against an independent
// transcription of the definition (32 partial sums in index order, the
// tree, then the tail one by one) on lengths around the block size, with
// values over a wide exponent range, and the result against the plain
// float64 sum (the same up to rounding).
func TestSumSquaresSameBits(t *testing.T) {
	r := rng.New(1, "kernel/sumsq", 0)
	for _, n := range []int{0, 1, 31, 32, 33, 63, 64, 95, 257, 4096, 4161, 9346} {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(r.NormFloat64() * math.Pow(2, float64(r.IntN(40)-20)))
		}
		var part [32]float64
		nb := n &^ 31
		for i := range nb {
			part[i%32] += float64(x[i]) * float64(x[i])
		}
		var tr [8]float64
		for l := range tr {
			tr[l] = (part[l] + part[l+8]) + (part[l+16] + part[l+24])
		}
		want := ((tr[0] + tr[4]) + (tr[2] + tr[6])) + ((tr[1] + tr[5]) + (tr[3] + tr[7]))
		if nb == 0 {
			want = 0
		}
		var plain float64
		for i, v := range x {
			if i >= nb {
				want += float64(v) * float64(v)
			}
			plain += float64(v) * float64(v)
		}
		for _, l := range Levels() {
			got := sumSquaresOn(l, x)
			if math.Float64bits(got) != math.Float64bits(want) {
				t.Fatalf("%s n=%d: %v, want %v", l, n, got, want)
			}
		}
		if math.Abs(want-plain) > 1e-13*plain {
			t.Fatalf("n=%d: %v, the plain sum %v", n, want, plain)
		}
	}
}

// TestScale checks every path against x[i]·c, and that nothing past the
// slice is written.
func TestScale(t *testing.T) {
	r := rng.New(1, "kernel/scale", 0)
	for _, n := range []int{0, 1, 7, 8, 9, 31, 32, 33, 100} {
		src := make([]float32, n+1)
		for i := range src {
			src[i] = float32(r.NormFloat64())
		}
		const c = float32(0.3712)
		for _, l := range Levels() {
			x := append([]float32(nil), src...)
			scaleOn(l, x[:n], c)
			for i := range n {
				if x[i] != src[i]*c {
					t.Fatalf("%s n=%d i=%d: %v, want %v", l, n, i, x[i], src[i]*c)
				}
			}
			if x[n] != src[n] {
				t.Fatalf("%s n=%d: wrote past the end", l, n)
			}
		}
	}
}

func BenchmarkSumSquares(b *testing.B) {
	x := make([]float32, 9346)
	for i := range x {
		x[i] = float32(i%17) - 8
	}
	for _, l := range Levels() {
		b.Run(l.String(), func(b *testing.B) {
			for b.Loop() {
				sumSquaresOn(l, x)
			}
		})
	}
}
