//go:build !(goexperiment.simd && amd64)

package nn

import "fmt"

func archSIMD() (Gemm, error) {
	return nil, fmt.Errorf("%w: archsimd (build with GOEXPERIMENT=simd on amd64)", ErrUnavailable)
}
