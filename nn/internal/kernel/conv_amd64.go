//go:build !purego

package kernel

//go:noescape
func kern6x16(k int, a *float32, rsa, csa int, b *float32, ldb int, c *float32, ldc int, flags int)

// convGemmAsm runs kern6x16 over the first m − m % 6 rows. A few rows
// (m ≤ 64) against many columns take the columns outermost, so that one
// 16-column strip of B serves every row while it is in L1; otherwise
// the rows are, so a 6-row strip of A serves every column.
func convGemmAsm(rsa, csa, m, n, k int, a, b []float32, ldb int, c []float32, ldc int, flags int) {
	if m <= 64 {
		for j := 0; j < n; j += 16 {
			for i := 0; i+6 <= m; i += 6 {
				kern6x16(k, &a[i*rsa], 4*rsa, 4*csa, &b[j], 4*ldb, &c[i*ldc+j], 4*ldc, flags)
			}
		}
		return
	}
	for i := 0; i+6 <= m; i += 6 {
		for j := 0; j < n; j += 16 {
			kern6x16(k, &a[i*rsa], 4*rsa, 4*csa, &b[j], 4*ldb, &c[i*ldc+j], 4*ldc, flags)
		}
	}
}

//go:noescape
func kern6x16g(k int, a0, a1, a2, a3, a4, a5 *float32, off *int, b *float32, ldb int, c *float32, ldc int, flags int)

const gatherAsm = true

// convGatherAsm runs kern6x16g over all m rows, rows first; a last group
// of fewer than 6 rows repeats its last row and goes through tmp.
func convGatherAsm(m, n, k int, src []float32, rows, offs []int, b []float32, ldb int, c []float32, ldc int, flags int, tmp *[6 * 16]float32) {
	for i := 0; i < m; i += 6 {
		var a [6]*float32
		for t := range a {
			a[t] = &src[rows[min(i+t, m-1)]]
		}
		for j := 0; j < n; j += 16 {
			if i+6 <= m {
				kern6x16g(k, a[0], a[1], a[2], a[3], a[4], a[5], &offs[0], &b[j], 4*ldb, &c[i*ldc+j], 4*ldc, flags)
				continue
			}
			for t := range 6 {
				copy(tmp[t*16:(t+1)*16], c[min(i+t, m-1)*ldc+j:][:16])
			}
			kern6x16g(k, a[0], a[1], a[2], a[3], a[4], a[5], &offs[0], &b[j], 4*ldb, &tmp[0], 64, flags)
			for t := range m - i {
				copy(c[(i+t)*ldc+j:][:16], tmp[t*16:(t+1)*16])
			}
		}
	}
}

//go:noescape
func addRuns4(dst, src *float32, c, k, w, hw int)

func addRuns4Asm(dst, src []float32, c, k, w, hw int) { addRuns4(&dst[0], &src[0], c, k, w, hw) }
