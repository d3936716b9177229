//go:build !purego

package kernel

//go:noescape
func sumSquaresAVX(x *float32, n int) float64

//go:noescape
func scaleAVX(x *float32, n int, c float32)

func sumSquaresAsm(x []float32, n int) float64 { return sumSquaresAVX(&x[0], n) }

func scaleAsm(x []float32, n int, c float32) { scaleAVX(&x[0], n, c) }
