//go:build goexperiment.simd && amd64

package nn

import (
	"fmt"
	"simd/archsimd"
)

// archSIMD returns the backend written with Go 1.26's experimental
// simd/archsimd package (GOEXPERIMENT=simd): the same 4×16 register tile as
// the assembly kernels, in Go. It exists to compare the two routes; the
// default build does not include it.
func archSIMD() (Gemm, error) {
	if !archsimd.X86.AVX2() || !archsimd.X86.FMA() {
		return nil, fmt.Errorf("%w: archsimd needs AVX2 and FMA", ErrUnavailable)
	}
	return simdGemm{}, nil
}

type simdGemm struct{}

func (simdGemm) Name() string { return "archsimd" }

func (g simdGemm) Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	if alpha == 1 && !transB && (beta == 0 || beta == 1) {
		g.gemmFused(transA, m, n, k, a, lda, b, ldb, c, ldc, beta == 1, nil, false)
		return
	}
	refSgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// gemmFused: C = op(A)·B + bias (or C += op(A)·B), then optional ReLU. Rows
// are taken four at a time (the last tile repeats the last row, as the
// assembly does); columns 16 at a time, the tail through partial loads.
func (simdGemm) gemmFused(transA bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, acc bool, bias []float32, relu bool) {
	rsa, csa := lda, 1
	if transA {
		rsa, csa = 1, lda
	}
	zero := archsimd.BroadcastFloat32x8(0)
	load := func(s []float32, off, w int) (archsimd.Float32x8, archsimd.Float32x8) {
		if w >= 16 {
			return archsimd.LoadFloat32x8Slice(s[off:]), archsimd.LoadFloat32x8Slice(s[off+8:])
		}
		lo := archsimd.LoadFloat32x8SlicePart(s[off : off+min(w, 8)])
		hi := zero
		if w > 8 {
			hi = archsimd.LoadFloat32x8SlicePart(s[off+8 : off+w])
		}
		return lo, hi
	}
	store := func(s []float32, off, w int, lo, hi archsimd.Float32x8) {
		if w >= 16 {
			lo.StoreSlice(s[off:])
			hi.StoreSlice(s[off+8:])
			return
		}
		lo.StoreSlicePart(s[off : off+min(w, 8)])
		if w > 8 {
			hi.StoreSlicePart(s[off+8 : off+w])
		}
	}
	for i := 0; i < m; i += 4 {
		rows := [4]int{i, min(i+1, m-1), min(i+2, m-1), min(i+3, m-1)}
		for j := 0; j < n; j += 16 {
			w := min(16, n-j)
			var lo, hi [4]archsimd.Float32x8
			for r := range 4 {
				switch {
				case acc:
					lo[r], hi[r] = load(c, rows[r]*ldc+j, w)
				case bias != nil:
					lo[r], hi[r] = load(bias, j, w)
				default:
					lo[r], hi[r] = zero, zero
				}
			}
			for p := 0; p < k; p++ {
				b0, b1 := load(b, p*ldb+j, w)
				for r := range 4 {
					av := archsimd.BroadcastFloat32x8(a[rows[r]*rsa+p*csa])
					lo[r] = b0.MulAdd(av, lo[r])
					hi[r] = b1.MulAdd(av, hi[r])
				}
			}
			for r := range 4 {
				if relu {
					lo[r], hi[r] = lo[r].Max(zero), hi[r].Max(zero)
				}
				store(c, rows[r]*ldc+j, w, lo[r], hi[r])
			}
		}
	}
}
