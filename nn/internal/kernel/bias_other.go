//go:build !amd64 || purego

package kernel

func addBiasAsm(x []float32, b float32, relu bool) {}
