//go:build openblas

package nn

/*
#cgo LDFLAGS: -lopenblas
#include <cblas.h>

// Declared by OpenBLAS's cblas.h; repeated so other CBLAS headers work too.
void openblas_set_num_threads(int num_threads);
*/
import "C"

import (
	"sync"
	"unsafe"
)

// openblasOnce pins OpenBLAS to one thread, the first time the backend is
// requested: herd parallelises across actors and learners, not inside a
// GEMM, and a single thread keeps reductions in a fixed order. This is a
// process-wide library setting, not state of ours.
var openblasOnce sync.Once

func openBLAS() (Gemm, error) {
	openblasOnce.Do(func() { C.openblas_set_num_threads(1) })
	return openblasGemm{}, nil
}

type openblasGemm struct{}

func (openblasGemm) Name() string { return "openblas" }

func (openblasGemm) Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	if k == 0 {
		refSgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	ta, tb := uint32(C.CblasNoTrans), uint32(C.CblasNoTrans)
	if transA {
		ta = uint32(C.CblasTrans)
	}
	if transB {
		tb = uint32(C.CblasTrans)
	}
	C.cblas_sgemm(C.CblasRowMajor, C.enum_CBLAS_TRANSPOSE(ta), C.enum_CBLAS_TRANSPOSE(tb),
		C.blasint(m), C.blasint(n), C.blasint(k), C.float(alpha),
		(*C.float)(unsafe.Pointer(&a[0])), C.blasint(lda),
		(*C.float)(unsafe.Pointer(&b[0])), C.blasint(ldb), C.float(beta),
		(*C.float)(unsafe.Pointer(&c[0])), C.blasint(ldc))
}
