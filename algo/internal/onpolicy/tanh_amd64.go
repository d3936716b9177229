//go:build !purego

package onpolicy

import "golang.org/x/sys/cpu"

// haveAVX2 reports whether tanhTo and tanhBackward run their AVX2 kernels,
// haveAVX512 whether tanhTo runs tanhAVX512 on the multiples of 16. Set
// once at start-up from CPUID; tests turn haveAVX512 off to reach the
// AVX2 kernel on a machine that has both.
var (
	haveAVX2   = cpu.X86.HasAVX2
	haveAVX512 = cpu.X86.HasAVX2 && cpu.X86.HasAVX512F
)

// tanhAVX512 is tanhToGo on n elements, n a multiple of 16; c is
// tanhCoeffs.
//
//go:noescape
func tanhAVX512(dst, x, c *float32, n int)

// tanhBackAVX512 is tanhBackwardGo on n elements, n a multiple of 16.
//
//go:noescape
func tanhBackAVX512(dx, dy, y *float32, n int)

// tanhAVX2 is tanhToGo on n elements, n a multiple of 8; c is tanhCoeffs.
//
//go:noescape
func tanhAVX2(dst, x, c *float32, n int)

// tanhBackAVX2 is tanhBackwardGo on n elements, n a multiple of 8.
//
//go:noescape
func tanhBackAVX2(dx, dy, y *float32, n int)
