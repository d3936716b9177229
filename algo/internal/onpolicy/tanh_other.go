//go:build !amd64 || purego

package onpolicy

// haveAVX2 and haveAVX512 are false off amd64 and in purego builds: the
// Go loops run.
const haveAVX2 = false

var haveAVX512 = false

func tanhAVX2(dst, x, c *float32, n int)       { panic("onpolicy: no AVX2") }
func tanhAVX512(dst, x, c *float32, n int)     { panic("onpolicy: no AVX-512") }
func tanhBackAVX2(dx, dy, y *float32, n int)   { panic("onpolicy: no AVX2") }
func tanhBackAVX512(dx, dy, y *float32, n int) { panic("onpolicy: no AVX-512") }
