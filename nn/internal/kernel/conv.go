package kernel

// ConvGemm is Gemm without bias or ReLU for the convolutions' large
// products, in 6×16 AVX2 tiles (kern6x16, also on AVX-512 CPUs) where n
// is a multiple of 16; the last m % 6 rows go through Gemm. Every element
// is the chain Gemm sums, so the bits are Gemm's. It reports false, doing
// nothing, where it does not apply (useAsm unset, a level below AVX2FMA,
// n not a multiple of 16, k = 0 or m < 6): the caller then runs its Gemm.
func ConvGemm(useAsm bool, transA bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, acc bool) bool {
	if on(useAsm) < AVX2FMA || n%16 != 0 || n == 0 || k == 0 || m < 6 {
		return false
	}
	rsa, csa := checkedStrides(transA, m, n, k, a, lda, b, ldb, c, ldc)
	flags := 0
	if acc {
		flags = 1
	}
	convGemmAsm(rsa, csa, m, n, k, a, b, ldb, c, ldc, flags)
	if m6 := m - m%6; m6 < m {
		gemmOn(active, transA, m-m6, n, k, a[m6*rsa:], lda, b, ldb, c[m6*ldc:], ldc, acc, nil, false)
	}
	return true
}

// ConvGemmGather computes C = A·B (C += A·B with acc) for the m×k matrix
// A(i, p) = src[rows[i] + offs[p]], reading a convolution's taps straight
// from its image: each element is the chain Gemm sums, so the bits are
// Gemm's on the same A. It runs the AVX2 kernel (kern6x16g) with n a
// multiple of 16, and reports false, doing nothing, elsewhere.
func ConvGemmGather(useAsm bool, m, n, k int, src []float32, rows, offs []int, b []float32, ldb int, c []float32, ldc int, acc bool) bool {
	if !gatherAsm || on(useAsm) < AVX2FMA || n%16 != 0 || n == 0 || k == 0 || m == 0 {
		return false
	}
	// The kernel trusts its pointers; check the extents once here.
	rows, offs = rows[:m], offs[:k]
	lo, hi := rows[0], rows[0]
	for _, r := range rows {
		lo, hi = min(lo, r), max(hi, r)
	}
	olo, ohi := offs[0], offs[0]
	for _, o := range offs {
		olo, ohi = min(olo, o), max(ohi, o)
	}
	_ = src[hi+ohi]
	_ = src[lo+olo]
	if lo < 0 || lo+olo < 0 {
		panic("kernel: ConvGemmGather: negative offset")
	}
	_ = b[(k-1)*ldb+n-1]
	_ = c[(m-1)*ldc+n-1]
	flags := 0
	if acc {
		flags = 1
	}
	var tmp [6 * 16]float32
	convGatherAsm(m, n, k, src, rows, offs, b, ldb, c, ldc, flags, &tmp)
	return true
}

// AddRuns adds src, c·k runs of k values laid end to end, onto dst: run
// (ch, t) onto dst[ch·hw + t·w …]. It is the scatter of one row of a
// convolution's dX̂ᵀ whose kernel rows all lie inside the image; each
// value is one add, dst + src, in any order (the runs do not overlap).
func AddRuns(dst, src []float32, c, k, w, hw int) {
	if c <= 0 || k <= 0 {
		return
	}
	// The assembly trusts its pointers: check the extents once.
	_ = src[c*k*k-1]
	_ = dst[(c-1)*hw+(k-1)*w+k-1]
	if k == 4 && active >= AVX2FMA {
		addRuns4Asm(dst, src, c, k, w, hw)
		return
	}
	for ch := range c {
		for t := range k {
			d, s := dst[ch*hw+t*w:][:k], src[(ch*k+t)*k:][:k]
			for i, v := range s {
				d[i] += v
			}
		}
	}
}

// checkedStrides returns A's row and column strides (A^T's where transA)
// after checking, once, that A, B and C reach the extents an m×n×k
// product reads and writes: the assembly kernels trust their pointers, so
// a sizing bug panics here in Go instead of corrupting memory.
func checkedStrides(transA bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) (rsa, csa int) {
	rsa, csa = lda, 1
	if transA {
		rsa, csa = 1, lda
	}
	_ = a[(m-1)*rsa+(k-1)*csa]
	_ = b[(k-1)*ldb+n-1]
	_ = c[(m-1)*ldc+n-1]
	return rsa, csa
}
