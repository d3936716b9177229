package nn

import (
	"fmt"

	"gonum.org/v1/gonum/blas"
	gonumblas "gonum.org/v1/gonum/blas/gonum"

	"herd/nn/internal/kernel"
)

// Gemm is the matrix-multiply backend a network runs on. Implementations
// must be safe for concurrent use (they hold no per-call state), so one
// value can serve many networks.
//
// Sgemm computes C = alpha·op(A)·op(B) + beta·C for row-major matrices,
// with the BLAS (cblas RowMajor) argument convention: op(A) is m×k, op(B)
// is k×n, C is m×n; lda, ldb, ldc are the row strides of the matrices as
// stored (before op). beta == 0 means C is overwritten, never read.
type Gemm interface {
	Name() string
	Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int)
}

// fusedGemm is the optional fast path the native backends offer: the
// forward Linear with bias and ReLU fused into the kernel, and the
// transposed-A product with accumulation used for dW.
type fusedGemm interface {
	gemmFused(transA bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, acc bool, bias []float32, relu bool)
}

// DefaultGemm returns the fastest pure-Go backend for this CPU: AVX-512F
// or AVX2/FMA assembly micro-kernels on amd64 when the CPU has them, else
// the portable Go loops (see Kernels). It never needs cgo.
func DefaultGemm() Gemm { return native{asm: kernel.Active() != kernel.Portable} }

// Kernels names the kernels DefaultGemm and the element-wise operations
// (activations, optimizers) run in this process: "avx512" (amd64 CPUs with
// AVX-512F, AVX2 and FMA), "avx2-fma" (amd64 CPUs with AVX2 and FMA) or
// "portable" (every other CPU, and builds with the purego tag). Chosen once
// at start-up: the fastest the CPU runs, or the slower path named by the
// HERD_KERNELS environment variable (avx2-fma or portable), read once, to
// compare paths on one machine. summary.json and herd bench nn report it.
//
// Results are the same within float32 rounding on every path. avx512 and
// avx2-fma give the same bits (the AVX-512 kernels do the same operations
// in the same order per element); portable gives different bits. A seeded
// run gives the same bits on one path.
func Kernels() string { return kernel.Path() }

// KernelsErr reports an HERD_KERNELS value that names no path or one this
// CPU or build lacks (the fastest path then runs); nil otherwise.
func KernelsErr() error { return kernel.EnvErr() }

// BitsName is the name of the backend whose bits g reproduces: g's own
// name, except that the AVX-512 kernels give the AVX2 kernels' bits
// ("native-avx2"). Bit-identity fixtures are keyed by it.
func BitsName(g Gemm) string {
	if n, ok := g.(native); ok && n.asm {
		return "native-avx2"
	}
	return g.Name()
}

// PortableGemm returns the portable Go backend (no assembly), for
// comparison and for checking the assembly against it.
func PortableGemm() Gemm { return native{asm: false} }

// GonumGemm returns a backend over gonum's pure-Go Sgemm
// (gonum.org/v1/gonum/blas/gonum), the baseline the benchmarks compare with.
func GonumGemm() Gemm { return gonumGemm{} }

// GemmByName returns the backend called name: "native" (DefaultGemm),
// "go" (PortableGemm), "gonum", "openblas" (only in builds with the
// openblas tag) or "archsimd" (only with GOEXPERIMENT=simd).
func GemmByName(name string) (Gemm, error) {
	switch name {
	case "native", "":
		return DefaultGemm(), nil
	case "go":
		return PortableGemm(), nil
	case "gonum":
		return GonumGemm(), nil
	case "openblas":
		return openBLAS()
	case "archsimd":
		return archSIMD()
	}
	return nil, fmt.Errorf("%w: unknown gemm backend %q (want native, go, gonum, openblas or archsimd)", ErrUnavailable, name)
}

// GemmBackends lists the backend names available in this build.
func GemmBackends() []string {
	names := []string{"native", "go", "gonum"}
	if _, err := openBLAS(); err == nil {
		names = append(names, "openblas")
	}
	if _, err := archSIMD(); err == nil {
		names = append(names, "archsimd")
	}
	return names
}

type native struct{ asm bool }

func (g native) Name() string {
	switch {
	case !g.asm:
		return "go"
	case kernel.Active() == kernel.AVX512:
		return "native-avx512"
	}
	return "native-avx2"
}

func (g native) gemmFused(transA bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, acc bool, bias []float32, relu bool) {
	kernel.Gemm(g.asm, transA, m, n, k, a, lda, b, ldb, c, ldc, acc, bias, relu)
}

func (g native) Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	if alpha == 1 && !transB && (beta == 0 || beta == 1) {
		kernel.Gemm(g.asm, transA, m, n, k, a, lda, b, ldb, c, ldc, beta == 1, nil, false)
		return
	}
	refSgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// refSgemm is the obvious triple loop, used for the general cases the
// kernels do not cover and as the reference in tests.
func refSgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s float32
			for p := 0; p < k; p++ {
				var av, bv float32
				if transA {
					av = a[p*lda+i]
				} else {
					av = a[i*lda+p]
				}
				if transB {
					bv = b[j*ldb+p]
				} else {
					bv = b[p*ldb+j]
				}
				s += av * bv
			}
			if beta == 0 {
				c[i*ldc+j] = alpha * s
			} else {
				c[i*ldc+j] = alpha*s + beta*c[i*ldc+j]
			}
		}
	}
}

type gonumGemm struct{}

func (gonumGemm) Name() string { return "gonum" }

func (gonumGemm) Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	ta, tb := blas.NoTrans, blas.NoTrans
	if transA {
		ta = blas.Trans
	}
	if transB {
		tb = blas.Trans
	}
	gonumblas.Implementation{}.Sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}
