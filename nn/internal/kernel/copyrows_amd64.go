//go:build !purego

package kernel

//go:noescape
func copyRowsAVX(dst, src *float32, rows, w, lds int)

func copyRowsAsm(dst, src []float32, rows, w, lds int) { copyRowsAVX(&dst[0], &src[0], rows, w, lds) }
