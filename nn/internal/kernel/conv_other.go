//go:build !amd64 || purego

package kernel

func convGemmAsm(rsa, csa, m, n, k int, a, b []float32, ldb int, c []float32, ldc int, flags int) {}

const gatherAsm = false

func convGatherAsm(m, n, k int, src []float32, rows, offs []int, b []float32, ldb int, c []float32, ldc int, flags int, tmp *[6 * 16]float32) {
}

func addRuns4Asm(dst, src []float32, c, k, w, hw int) {}
