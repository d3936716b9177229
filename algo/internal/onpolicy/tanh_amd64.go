//go:build !purego

package onpolicy

import "golang.org/x/sys/cpu"

// haveAVX2 reports whether tanhTo and tanhBackward run their AVX2 kernels.
// Set once at start-up from CPUID and never changed.
var haveAVX2 = cpu.X86.HasAVX2

// tanhAVX2 is tanhToGo on n elements, n a multiple of 8; c is tanhCoeffs.
//
//go:noescape
func tanhAVX2(dst, x, c *float32, n int)

// tanhBackAVX2 is tanhBackwardGo on n elements, n a multiple of 8.
//
//go:noescape
func tanhBackAVX2(dx, dy, y *float32, n int)
