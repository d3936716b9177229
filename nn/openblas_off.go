//go:build !openblas

package nn

import "fmt"

func openBLAS() (Gemm, error) {
	return nil, fmt.Errorf("%w: openblas (build with -tags openblas and libopenblas-dev)", ErrUnavailable)
}
