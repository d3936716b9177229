package kernel

import (
	"math"
	"testing"

	"herd/internal/rng"
)

// TestConvGemmSameBits: ConvGemm and ConvGemmGather give Gemm's bits, from
// zero and accumulating, with row counts that leave 0 to 5 rows past the
// last 6-row tile, and A plain, transposed and gathered through offset
// tables; where they decline (no assembly, n not a multiple of 16) they
// write nothing.
func TestConvGemmSameBits(t *testing.T) {
	r := rng.New(1, "kernel/convgemm", 0)
	randn := func(n int) []float32 {
		s := make([]float32, n)
		for i := range s {
			s[i] = float32(r.NormFloat64())
		}
		return s
	}
	for _, sz := range [][3]int{{6, 16, 5}, {7, 32, 9}, {13, 48, 40}, {20, 16, 1}, {2, 16, 3}, {35, 64, 70}, {12, 20, 8}} {
		m, n, k := sz[0], sz[1], sz[2]
		for _, transA := range []bool{false, true} {
			for _, acc := range []bool{false, true} {
				a, b, c0 := randn(m*k), randn(k*n), randn(m*n)
				lda := k
				if transA {
					lda = m
				}
				want := append([]float32(nil), c0...)
				Gemm(true, transA, m, n, k, a, lda, b, n, want, n, acc, nil, false)
				got := append([]float32(nil), c0...)
				ran := ConvGemm(true, transA, m, n, k, a, lda, b, n, got, n, acc)
				if wantRan := active >= AVX2FMA && n%16 == 0 && m >= 6; ran != wantRan {
					t.Fatalf("%v transA %v: ConvGemm ran %v, want %v", sz, transA, ran, wantRan)
				}
				if !ran {
					want = c0
				}
				sameBits(t, "ConvGemm", sz, got, want)
			}
		}
		// A(i, p) = src[rows[i] + offs[p]], offsets scattered through src.
		src := randn(m*k + 50)
		rows, offs := make([]int, m), make([]int, k)
		for i := range rows {
			rows[i] = r.IntN(50)
		}
		for p := range offs {
			offs[p] = p*m + r.IntN(m)
		}
		a := make([]float32, m*k)
		for i := range m {
			for p := range k {
				a[i*k+p] = src[rows[i]+offs[p]]
			}
		}
		for _, acc := range []bool{false, true} {
			b, c0 := randn(k*n), randn(m*n)
			want := append([]float32(nil), c0...)
			Gemm(true, false, m, n, k, a, k, b, n, want, n, acc, nil, false)
			got := append([]float32(nil), c0...)
			if !ConvGemmGather(true, m, n, k, src, rows, offs, b, n, got, n, acc) {
				if active >= AVX2FMA && n%16 == 0 {
					t.Fatalf("%v: ConvGemmGather declined", sz)
				}
				want = c0
			}
			sameBits(t, "ConvGemmGather", sz, got, want)
		}
	}
}

func sameBits(t *testing.T, name string, sz [3]int, got, want []float32) {
	t.Helper()
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s %v: element %d = %v, want %v", name, sz, i, got[i], want[i])
		}
	}
}

// TestAddRuns: every run lands on its place, added once, for kernel rows
// of 3, 4 and 8 taps, and nothing else changes.
func TestAddRuns(t *testing.T) {
	for _, sz := range [][4]int{{1, 4, 4, 16}, {3, 4, 9, 90}, {2, 3, 7, 50}, {2, 8, 10, 100}} {
		c, k, w, hw := sz[0], sz[1], sz[2], sz[3]
		src := make([]float32, c*k*k)
		for i := range src {
			src[i] = float32(i + 1)
		}
		dst := make([]float32, c*hw)
		want := make([]float32, c*hw)
		for i := range dst {
			dst[i] = 0.5
			want[i] = 0.5
		}
		for ch := range c {
			for r := range k {
				for j := range k {
					want[ch*hw+r*w+j] += src[(ch*k+r)*k+j]
				}
			}
		}
		AddRuns(dst, src, c, k, w, hw)
		for i := range want {
			if dst[i] != want[i] {
				t.Fatalf("%v: dst[%d] = %v, want %v", sz, i, dst[i], want[i])
			}
		}
	}
}
