// Package kernel holds the GEMM micro-kernels behind nn's native backend:
// AVX2/FMA assembly on amd64 CPUs that have it, and a portable Go loop
// everywhere else (and in builds with the purego tag, which leave the
// assembly out). It trusts its inputs; nn checks sizes before calling.
package kernel

// Gemm computes, for row-major matrices,
//
//	C = op(A)·B + bias   (acc false; bias may be nil)
//	C = C + op(A)·B      (acc true; bias must be nil)
//
// then, if relu, C = max(C, 0). op(A) is m×k: with transA false A is m×k
// with leading dimension lda (op(A)[i][p] = a[i*lda+p]); with transA true A
// is stored k×m (op(A)[i][p] = a[p*lda+i]), which gives dW = Xᵀ·dY without
// materialising Xᵀ. B is k×n (ldb), C is m×n (ldc), bias has n entries.
//
// The summation order of every C[i][j] depends only on k and n (in p
// order; for n ≤ 8 the assembly uses four interleaved chains p mod 4,
// summed pairwise at the end), never on m or on which rows share a tile,
// so a row's result is bit-identical whatever batch it sits in, and
// nothing depends on the thread count.
func Gemm(useAsm bool, transA bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, acc bool, bias []float32, relu bool) {
	if m == 0 || n == 0 {
		return
	}
	if useAsm && HasAVX2FMA {
		gemmAsm(transA, m, n, k, a, lda, b, ldb, c, ldc, acc, bias, relu)
		return
	}
	GemmGo(transA, m, n, k, a, lda, b, ldb, c, ldc, acc, bias, relu)
}

// GemmGo is the portable version of Gemm. It works on four rows of C at a
// time so that every element of B loaded is used four times, and reslices
// so the compiler drops the bounds checks in the inner loop.
func GemmGo(transA bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, acc bool, bias []float32, relu bool) {
	sa, sp := lda, 1 // strides of op(A) along i and p
	if transA {
		sa, sp = 1, lda
	}
	for i := 0; i < m; i++ {
		crow := c[i*ldc : i*ldc+n]
		switch {
		case acc:
		case bias != nil:
			copy(crow, bias[:n])
		default:
			clear(crow)
		}
	}
	i := 0
	for ; i+4 <= m; i += 4 {
		c0 := c[i*ldc : i*ldc+n]
		c1 := c[(i+1)*ldc : (i+1)*ldc+n]
		c2 := c[(i+2)*ldc : (i+2)*ldc+n]
		c3 := c[(i+3)*ldc : (i+3)*ldc+n]
		for p := 0; p < k; p++ {
			a0, a1, a2, a3 := a[i*sa+p*sp], a[(i+1)*sa+p*sp], a[(i+2)*sa+p*sp], a[(i+3)*sa+p*sp]
			brow := b[p*ldb : p*ldb+n]
			c0, c1, c2, c3 := c0[:len(brow)], c1[:len(brow)], c2[:len(brow)], c3[:len(brow)]
			for j, bv := range brow {
				c0[j] += a0 * bv
				c1[j] += a1 * bv
				c2[j] += a2 * bv
				c3[j] += a3 * bv
			}
		}
	}
	for ; i < m; i++ {
		crow := c[i*ldc : i*ldc+n]
		for p := 0; p < k; p++ {
			aip := a[i*sa+p*sp]
			brow := b[p*ldb : p*ldb+n]
			crow := crow[:len(brow)]
			for j, bv := range brow {
				crow[j] += aip * bv
			}
		}
	}
	if relu {
		for i := 0; i < m; i++ {
			crow := c[i*ldc : i*ldc+n]
			for j, v := range crow {
				crow[j] = max(v, 0)
			}
		}
	}
}

// Path names the kernels this process runs, chosen once at start-up from
// the build (the purego tag leaves the assembly out) and the CPU:
// "avx2-fma" or "portable".
func Path() string {
	if HasAVX2FMA {
		return "avx2-fma"
	}
	return "portable"
}
