//go:build !purego

package kernel

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// maxLevel is the fastest path this CPU runs, from CPUID at start-up.
var maxLevel = func() Level {
	switch {
	case cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasAVX512F:
		return AVX512
	case cpu.X86.HasAVX2 && cpu.X86.HasFMA:
		return AVX2FMA
	}
	return Portable
}()

//go:noescape
func kern4x32z(k int, a0, a1, a2, a3 *float32, csa int, b *float32, ldb int, c0, c1, c2, c3 *float32, bias *float32, flags int, ncols int)

//go:noescape
func kern8x32z(k int, a *float32, rsa, csa int, b *float32, ldb int, c *float32, ldc int, bias *float32, flags int, ncols int)

//go:noescape
func kern4x16z(k int, a0, a1, a2, a3 *float32, csa int, b *float32, ldb int, c0, c1, c2, c3 *float32, bias *float32, flags int, ncols int)

//go:noescape
func kern1x64z(k int, a *float32, csa int, b *float32, ldb int, c *float32, bias *float32, flags int, ncols int)

//go:noescape
func adamZ(w, grad, m, v *float32, n int, c *[7]float32)

//go:noescape
func kern4x16(k int, a0, a1, a2, a3 *float32, csa int, b *float32, ldb int, c0, c1, c2, c3 *float32, bias *float32, flags int)

//go:noescape
func kern1x64(k int, a *float32, csa int, b *float32, ldb int, c *float32, bias *float32, flags int)

//go:noescape
func kern2x8n(k int, a0, a1 *float32, csa int, b *float32, ldb int, c0, c1 *float32, bias *float32, flags int, ncols int)

//go:noescape
func kern8x2p(k int, a *float32, rsa int, b *float32, c *float32, ldc int, bias *float32, flags int)

//go:noescape
func kern8x1(k int, a *float32, rsa int, b *float32, c *float32, ldc int, bias *float32, flags int)

//go:noescape
func kern16xT(k int, a *float32, lda int, b *float32, ldb int, c *float32, bias *float32, flags int)

//go:noescape
func kernKs(k int, a *float32, rsa int, m int, b *float32, ldb int, c *float32, ldc int, bias *float32, flags int)

//go:noescape
func kern8x8m(k int, a *float32, rsa, csa int, b *float32, ldb int, c *float32, ldc int, bias *float32, flags int, ncols int)

//go:noescape
func kern4x16m(k int, a0, a1, a2, a3 *float32, csa int, b *float32, ldb int, c0, c1, c2, c3 *float32, bias *float32, flags int, ncols int)

// gemmAsm tiles C into 4×16 blocks (4×32 with z, the AVX-512 kernels).
// Rows past m are duplicates of the last row (same inputs, same result
// written twice), so m need not be a multiple of 4; the last n % 16
// columns go through the masked kernel (with z every tile is masked).
// Narrow matrices (n ≤ 8) take kern2x8n on both paths, or for one or two
// columns the kernels that sum each element in its order with more lanes
// in use (kern16xT, kern8x1, kern8x2p).
func gemmAsm(z bool, transA bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, acc bool, bias []float32, relu bool) {
	if k == 0 {
		GemmGo(transA, m, n, k, a, lda, b, ldb, c, ldc, acc, bias, relu)
		return
	}
	rsa, csa := checkedStrides(transA, m, n, k, a, lda, b, ldb, c, ldc)
	if bias != nil {
		_ = bias[n-1]
	}
	flags := 0
	if acc {
		flags |= 1
	}
	if relu {
		flags |= 2
	}
	base := unsafe.Pointer(unsafe.SliceData(a))
	if !z && !transA && m > 1 && n > 8 && k <= smallK {
		gemmSmallK(base, rsa, m, n, k, b, ldb, c, ldc, bias, flags)
		return
	}
	if z && n > 8 {
		gemmZ(base, rsa, csa, m, n, k, b, ldb, c, ldc, bias, flags)
		return
	}
	if n <= 8 {
		// Narrow matrix: one column tile, four interleaved chains per
		// element (see kern2x8n); the order depends only on k.
		var bp *float32
		if bias != nil {
			bp = &bias[0]
		}
		i := 0
		if rsa == 1 && n <= 2 {
			// op(A) = Aᵀ with rows along A's rows (a narrow output
			// layer's dW): 16 rows of one column per call (kern16xT).
			i = gemmNarrowT(m, n, k, a, csa, b, ldb, c, ldc, bias, flags)
		}
		if n == 1 && ldb == 1 && csa == 1 {
			// One column (a value head), rows of A and B contiguous: 8
			// rows per call, a row's chains in one 128-bit half
			// (kern8x1).
			for ; i+8 <= m; i += 8 {
				kern8x1(k, (*float32)(unsafe.Add(base, 4*i*rsa)), 4*rsa, &b[0], &c[i*ldc], 4*ldc, bp, flags)
			}
		}
		if n == 2 && ldb == 2 && csa == 1 {
			// Two columns, rows of A and B contiguous: 8 rows per call
			// with the chains packed into one register (kern8x2p).
			for ; i+8 <= m; i += 8 {
				kern8x2p(k, (*float32)(unsafe.Add(base, 4*i*rsa)), 4*rsa, &b[0], &c[i*ldc], 4*ldc, bp, flags)
			}
		}
		for ; i < m; i += 2 {
			i1 := min(i+1, m-1)
			kern2x8n(k, (*float32)(unsafe.Add(base, 4*i*rsa)), (*float32)(unsafe.Add(base, 4*i1*rsa)), 4*csa,
				&b[0], 4*ldb, &c[i*ldc], &c[i1*ldc], bp, flags, n)
		}
		return
	}
	gemmTiles(base, rsa, csa, m, n, k, a, b, ldb, c, ldc, bias, flags)
}

// gemmNarrowT computes the first m &^ 15 rows of gemmAsm's product for
// transposed A (rsa = 1) and n ≤ 2 with kern16xT, one column at a time,
// and returns how many rows it did. A column of C with stride ldc > 1
// goes through a 16-value buffer.
func gemmNarrowT(m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, bias []float32, flags int) int {
	m16 := m &^ 15
	var buf [16]float32
	for j := range n {
		var bp *float32
		if bias != nil {
			bp = &bias[j]
		}
		for i := 0; i < m16; i += 16 {
			if ldc == 1 {
				kern16xT(k, &a[i], 4*lda, &b[j], 4*ldb, &c[i], bp, flags)
				continue
			}
			if flags&1 != 0 {
				for r := range buf {
					buf[r] = c[(i+r)*ldc+j]
				}
			}
			kern16xT(k, &a[i], 4*lda, &b[j], 4*ldb, &buf[0], bp, flags)
			for r, v := range buf {
				c[(i+r)*ldc+j] = v
			}
		}
	}
	return m16
}

// gemmTiles is gemmAsm's AVX2 tiling for n > 8: a 1×64 row kernel at
// batch 1, then 4×16 tiles, masked for the last n % 16 columns.
func gemmTiles(base unsafe.Pointer, rsa, csa, m, n, k int, a []float32, b []float32, ldb int, c []float32, ldc int, bias []float32, flags int) {
	j0 := 0
	if m == 1 {
		for ; j0+64 <= n; j0 += 64 {
			var bp *float32
			if bias != nil {
				bp = &bias[j0]
			}
			kern1x64(k, &a[0], 4*csa, &b[j0], 4*ldb, &c[j0], bp, flags)
		}
	}
	nfull := n &^ 15
	i8 := 0 // rows whose last n % 16 (≤ 8) columns kern8x8m computes
	if tail := n - nfull; tail > 0 && tail <= 8 && nfull >= j0 {
		var bp *float32
		if bias != nil {
			bp = &bias[nfull]
		}
		for ; i8+8 <= m; i8 += 8 {
			kern8x8m(k, (*float32)(unsafe.Add(base, 4*i8*rsa)), 4*rsa, 4*csa, &b[nfull], 4*ldb,
				&c[i8*ldc+nfull], 4*ldc, bp, flags, tail)
		}
	}
	for i := 0; i < m; i += 4 {
		i1, i2, i3 := min(i+1, m-1), min(i+2, m-1), min(i+3, m-1)
		a0 := (*float32)(unsafe.Add(base, 4*i*rsa))
		a1 := (*float32)(unsafe.Add(base, 4*i1*rsa))
		a2 := (*float32)(unsafe.Add(base, 4*i2*rsa))
		a3 := (*float32)(unsafe.Add(base, 4*i3*rsa))
		for j := j0; j < nfull; j += 16 {
			var bp *float32
			if bias != nil {
				bp = &bias[j]
			}
			kern4x16(k, a0, a1, a2, a3, 4*csa, &b[j], 4*ldb,
				&c[i*ldc+j], &c[i1*ldc+j], &c[i2*ldc+j], &c[i3*ldc+j], bp, flags)
		}
		if nfull < n && nfull >= j0 && i >= i8 {
			j := nfull
			var bp *float32
			if bias != nil {
				bp = &bias[j]
			}
			kern4x16m(k, a0, a1, a2, a3, 4*csa, &b[j], 4*ldb,
				&c[i*ldc+j], &c[i1*ldc+j], &c[i2*ldc+j], &c[i3*ldc+j], bp, flags, n-nfull)
		}
	}
}

// smallK is the largest k gemmSmallK takes: its kernel holds k rows of an
// 8-column strip of B in registers.
const smallK = 8

// gemmSmallK is gemmAsm's AVX2 path for k ≤ smallK with contiguous rows of
// A: a CartPole-sized input layer forward (k = inputs) and the dX product
// through an output layer (k = outputs). Where the 4×16 tiles spend most
// of a call loading, zeroing and storing C for a few FMAs, kernKs keeps
// B's strip in registers and runs down all m rows in one call; the last
// n % 8 columns take the masked 4×16 kernel. Each element is summed as the
// tiles sum it (same bits). At batch 1 the 1×64 row kernel is faster (one
// call, eight accumulators), so gemmAsm keeps it there.
func gemmSmallK(base unsafe.Pointer, rsa, m, n, k int, b []float32, ldb int, c []float32, ldc int, bias []float32, flags int) {
	biasAt := func(j int) *float32 {
		if bias == nil {
			return nil
		}
		return &bias[j]
	}
	n8 := n &^ 7
	for j := 0; j < n8; j += 8 {
		kernKs(k, (*float32)(base), 4*rsa, m, &b[j], 4*ldb, &c[j], 4*ldc, biasAt(j), flags)
	}
	if n8 == n {
		return
	}
	for i := 0; i < m; i += 4 {
		i1, i2, i3 := min(i+1, m-1), min(i+2, m-1), min(i+3, m-1)
		kern4x16m(k, (*float32)(unsafe.Add(base, 4*i*rsa)), (*float32)(unsafe.Add(base, 4*i1*rsa)),
			(*float32)(unsafe.Add(base, 4*i2*rsa)), (*float32)(unsafe.Add(base, 4*i3*rsa)), 4, &b[n8], 4*ldb,
			&c[i*ldc+n8], &c[i1*ldc+n8], &c[i2*ldc+n8], &c[i3*ldc+n8], biasAt(n8), flags, n-n8)
	}
}

// gemmZ is gemmAsm's AVX-512 tiling: one 1×64 row kernel at batch 1,
// 8×32 tiles for whole groups of 8 rows and 4×32 tiles for the rest, each
// masked to the columns left (4×16 for a last tile of at most 16).
func gemmZ(base unsafe.Pointer, rsa, csa, m, n, k int, b []float32, ldb int, c []float32, ldc int, bias []float32, flags int) {
	biasAt := func(j int) *float32 {
		if bias == nil {
			return nil
		}
		return &bias[j]
	}
	if m == 1 {
		for j := 0; j < n; j += 64 {
			kern1x64z(k, (*float32)(base), 4*csa, &b[j], 4*ldb, &c[j], biasAt(j), flags, min(64, n-j))
		}
		return
	}
	i := 0
	for ; i+8 <= m; i += 8 {
		for j := 0; j < n; j += 32 {
			if n-j <= 16 {
				break
			}
			kern8x32z(k, (*float32)(unsafe.Add(base, 4*i*rsa)), 4*rsa, 4*csa, &b[j], 4*ldb,
				&c[i*ldc+j], 4*ldc, biasAt(j), flags, min(32, n-j))
		}
		if last := (n - 1) &^ 31; n-last <= 16 {
			gemmZRows(base, rsa, csa, i, i+8, last, n, k, b, ldb, c, ldc, biasAt, flags)
		}
	}
	gemmZRows(base, rsa, csa, i, m, 0, n, k, b, ldb, c, ldc, biasAt, flags)
}

// gemmZRows computes rows [i0, m) × columns [j0, n) of gemmZ's product in
// 4×32 tiles (4×16 for a last tile of at most 16 columns).
func gemmZRows(base unsafe.Pointer, rsa, csa, i0, m, j0, n, k int, b []float32, ldb int, c []float32, ldc int, biasAt func(int) *float32, flags int) {
	for i := i0; i < m; i += 4 {
		i1, i2, i3 := min(i+1, m-1), min(i+2, m-1), min(i+3, m-1)
		a0 := (*float32)(unsafe.Add(base, 4*i*rsa))
		a1 := (*float32)(unsafe.Add(base, 4*i1*rsa))
		a2 := (*float32)(unsafe.Add(base, 4*i2*rsa))
		a3 := (*float32)(unsafe.Add(base, 4*i3*rsa))
		for j := j0; j < n; j += 32 {
			if n-j == 16 {
				// Measured faster than the masked 16-lane tile on a
				// CPU that splits 512-bit operations in two (AMD Zen 4).
				kern4x16(k, a0, a1, a2, a3, 4*csa, &b[j], 4*ldb,
					&c[i*ldc+j], &c[i1*ldc+j], &c[i2*ldc+j], &c[i3*ldc+j], biasAt(j), flags)
				continue
			}
			if n-j < 16 {
				// A 4×32 tile would spend half its FMAs on masked
				// columns.
				kern4x16z(k, a0, a1, a2, a3, 4*csa, &b[j], 4*ldb,
					&c[i*ldc+j], &c[i1*ldc+j], &c[i2*ldc+j], &c[i3*ldc+j], biasAt(j), flags, n-j)
				continue
			}
			kern4x32z(k, a0, a1, a2, a3, 4*csa, &b[j], 4*ldb,
				&c[i*ldc+j], &c[i1*ldc+j], &c[i2*ldc+j], &c[i3*ldc+j], biasAt(j), flags, min(32, n-j))
		}
	}
}

func adamZAsm(w, g, m, v []float32, n int, c *[7]float32) { adamZ(&w[0], &g[0], &m[0], &v[0], n, c) }

//go:noescape
func reluBackAVX(dx, dy, y *float32, n int)

func reluBackAsm(dx, dy, y []float32, n int) { reluBackAVX(&dx[0], &dy[0], &y[0], n) }

//go:noescape
func tanhAVX(dst, src *float32, n int)

//go:noescape
func tanhBackAVX(dx, dy, y *float32, n int)

func tanhAsm(dst, src []float32, n int)      { tanhAVX(&dst[0], &src[0], n) }
func tanhBackAsm(dx, dy, y []float32, n int) { tanhBackAVX(&dx[0], &dy[0], &y[0], n) }

//go:noescape
func adamAVX(w, grad, m, v *float32, n int, c *[7]float32)

func adamAsm(w, g, m, v []float32, n int, c *[7]float32) { adamAVX(&w[0], &g[0], &m[0], &v[0], n, c) }

//go:noescape
func fmaLoopZ(n int)

//go:noescape
func fmaLoopY(n int)

// fmaLoop runs n iterations of 12 FMAs on l's registers and returns their
// lane count.
func fmaLoop(l Level, n int) int {
	if l >= AVX512 {
		fmaLoopZ(n)
		return 16
	}
	fmaLoopY(n)
	return 8
}

//go:noescape
func transpose8AVX(dst *float32, ldd int, src *float32, lds int, nblk int)

// transposeAsm transposes the leading rows&^7 × cols&^7 corner of src
// into dst (the caller does the edges).
func transposeAsm(dst, src []float32, rows, cols int) {
	nb := cols / 8
	for i := 0; i+8 <= rows && nb > 0; i += 8 {
		transpose8AVX(&dst[i], 4*rows, &src[i*cols], 4*cols, nb)
	}
}
