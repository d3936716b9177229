// Package kernel holds the GEMM micro-kernels behind nn's native backend:
// AVX-512F or AVX2/FMA assembly on amd64 CPUs that have it, and a portable
// Go loop everywhere else (and in builds with the purego tag, which leave
// the assembly out). It trusts its inputs; nn checks sizes before calling.
//
// The path is chosen once at start-up (Active): the fastest the CPU runs,
// or a slower one named by the HERD_KERNELS environment variable. The
// exported functions take useAsm: true runs the active path, false the
// portable loops. Each has an unexported form taking a Level, which the
// tests use to run every path the CPU has.
package kernel

import (
	"fmt"
	"os"
)

// Level is a kernel path; a higher level needs more of the CPU.
type Level uint8

const (
	// Portable is the Go loops, on every CPU and in purego builds.
	Portable Level = iota
	// AVX2FMA is the AVX2 + FMA assembly.
	AVX2FMA
	// AVX512 is the AVX-512F assembly for the GEMM tiles and Adam; the
	// other element-wise operations and narrow (n ≤ 8) products run the
	// AVX2 code. It gives the same bits as AVX2FMA.
	AVX512
)

// String is the name HERD_KERNELS and nn.Kernels use.
func (l Level) String() string {
	switch l {
	case AVX2FMA:
		return "avx2-fma"
	case AVX512:
		return "avx512"
	}
	return "portable"
}

// Levels lists the paths this build and CPU can run, slowest first.
func Levels() []Level {
	var ls []Level
	for l := Portable; l <= maxLevel; l++ {
		ls = append(ls, l)
	}
	return ls
}

// EnvVar names the environment variable that selects a slower path.
const EnvVar = "HERD_KERNELS"

var active, envErr = choose(os.Getenv(EnvVar), maxLevel)

// choose returns the path named by env ("" for the fastest, max), or max
// and an error when env names no path or one this CPU lacks.
func choose(env string, max Level) (Level, error) {
	if env == "" {
		return max, nil
	}
	for l := Portable; l <= AVX512; l++ {
		if env == l.String() {
			if l > max {
				return max, fmt.Errorf("%s=%s: this CPU and build run at most %s", EnvVar, env, max)
			}
			return l, nil
		}
	}
	return max, fmt.Errorf("%s=%q: want portable, avx2-fma or avx512", EnvVar, env)
}

// Active is the path this process runs, chosen once at start-up.
func Active() Level { return active }

// EnvErr reports an unusable HERD_KERNELS value (the fastest path then
// runs); nil when it is unset or valid.
func EnvErr() error { return envErr }

// on is the level a call with useAsm runs.
func on(useAsm bool) Level {
	if useAsm {
		return active
	}
	return Portable
}

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
	gemmOn(on(useAsm), transA, m, n, k, a, lda, b, ldb, c, ldc, acc, bias, relu)
}

func gemmOn(l Level, transA bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, acc bool, bias []float32, relu bool) {
	if m == 0 || n == 0 {
		return
	}
	if l >= AVX2FMA {
		gemmAsm(l >= AVX512, transA, m, n, k, a, lda, b, ldb, c, ldc, acc, bias, relu)
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

// Path names the kernels this process runs: Active().String().
func Path() string { return active.String() }
