//go:build !purego

package kernel

//go:noescape
func addBiasAVX(x *float32, n int, b float32, relu bool)

func addBiasAsm(x []float32, b float32, relu bool) { addBiasAVX(&x[0], len(x), b, relu) }
