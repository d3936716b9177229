package onpolicy

import (
	"math"
	"sync"
)

// tanhTo writes tanh(x) into dst elementwise and returns dst.
//
// Why not math.Tanh: nn's Tanh layer calls float64 math.Tanh per element,
// which the PPO profile showed at 60% of CartPole training time
// (docs/ARCHITECTURE.md). This version is a piecewise cubic Hermite
// interpolant of tanh on [0, 10] with 32 pieces per unit: on each piece
// [x₀, x₀+h] it matches tanh and its derivative 1 − tanh² at both ends, so
// the interpolation error is at most h⁴/384·max|tanh⁗| ≈ 1e-8 (h = 1/32);
// evaluated in float32 the result is within 1.2e-7 (two ulps at 1; TestTanhAccuracy); tanh(10) rounds to 1 in float32, so larger
// |x| return ±1. The sign is restored with bit operations, not a branch:
// the sign of a hidden pre-activation is a coin flip, and mispredicted
// branches cost more than the arithmetic. No division, no exp.
//
// NaN inputs give ±1 instead of NaN (the clamp compares false); the linear
// output layers still propagate a diverged network's NaN.
//
// On amd64 with AVX-512 the whole multiples of 16 go through tanhAVX512
// (tanh512_amd64.s), with AVX2 the multiples of 8 left through tanhAVX2
// (tanh_amd64.s): both run the same float32 operations in the same order,
// 16 or 8 lanes at a time, and so give the same bits for every input
// (checked over float32 patterns by TestTanhAsmMatchesGo); the rest runs
// here.
func tanhTo(dst, x []float32) []float32 {
	dst = dst[:len(x)]
	i := 0
	if haveAVX2 {
		c := &tanhCoeffs()[0]
		if haveAVX512 {
			if i = len(x) &^ 15; i > 0 {
				tanhAVX512(&dst[0], &x[0], c, i)
			}
		}
		if j := len(x) &^ 7; j > i {
			tanhAVX2(&dst[i], &x[i], c, j-i)
			i = j
		}
	}
	tanhToGo(dst[i:], x[i:])
	return dst
}

// tanhToGo is tanhTo in Go: the reference the assembly must match bit for
// bit, and the tail and the path without AVX2.
func tanhToGo(dst, x []float32) {
	c := tanhCoeffs()
	dst = dst[:len(x)]
	for i, v := range x {
		// Everything stays float32: a float32→float64 conversion writes
		// only half of its register, which chained every element to the
		// previous one.
		bits := math.Float32bits(v)
		a := math.Float32frombits(bits &^ (1 << 31))
		if !(a < tanhMax) {
			a = tanhMax
		}
		u := a * tanhPerUnit
		k := min(int(u), tanhPieces-1)
		s := u - float32(k)
		p := c[4*k : 4*k+4 : 4*k+4]
		t := p[0] + s*(p[1]+s*(p[2]+s*p[3]))
		dst[i] = math.Float32frombits(math.Float32bits(t) | bits&(1<<31))
	}
}

// tanhBackward writes dx = dy ⊙ (1 − y²), tanh's derivative from its
// output, with the multiples of 16 in AVX-512 and those of 8 left in AVX2
// where the CPU has them (same operations, same order, same bits).
func tanhBackward(dx, dy, y []float32) {
	dx, dy = dx[:len(y)], dy[:len(y)]
	i := 0
	if haveAVX2 {
		if haveAVX512 {
			if i = len(y) &^ 15; i > 0 {
				tanhBackAVX512(&dx[0], &dy[0], &y[0], i)
			}
		}
		if j := len(y) &^ 7; j > i {
			tanhBackAVX2(&dx[i], &dy[i], &y[i], j-i)
			i = j
		}
	}
	tanhBackwardGo(dx[i:], dy[i:], y[i:])
}

// tanhBackwardGo is tanhBackward in Go: the reference, the tail, and the
// path without AVX2.
func tanhBackwardGo(dx, dy, y []float32) {
	dx, dy = dx[:len(y)], dy[:len(y)]
	for i, v := range y {
		dx[i] = dy[i] * (1 - v*v)
	}
}

// tanh32 is tanhTo for one value.
func tanh32(v float32) float32 {
	var d [1]float32
	return tanhTo(d[:], []float32{v})[0]
}

const (
	tanhMax     = 10
	tanhPerUnit = 32
	tanhPieces  = tanhMax * tanhPerUnit
)

// tanhCoeffs returns, for each piece k, the cubic c₀ + c₁s + c₂s² + c₃s³ in
// the local coordinate s ∈ [0, 1) of the Hermite interpolant: with t₀, t₁
// the values and m₀ = h(1 − t₀²), m₁ = h(1 − t₁²) the scaled slopes at the
// ends, c₀ = t₀, c₁ = m₀, c₂ = 3(t₁ − t₀) − 2m₀ − m₁, c₃ = 2(t₀ − t₁) + m₀ + m₁.
// Built once on first use and read-only afterwards.
var tanhCoeffs = sync.OnceValue(func() []float32 {
	c := make([]float32, 4*tanhPieces)
	h := 1.0 / tanhPerUnit
	for k := range tanhPieces {
		t0, t1 := math.Tanh(float64(k)*h), math.Tanh(float64(k+1)*h)
		m0, m1 := h*(1-t0*t0), h*(1-t1*t1)
		c[4*k], c[4*k+1] = float32(t0), float32(m0)
		c[4*k+2] = float32(3*(t1-t0) - 2*m0 - m1)
		c[4*k+3] = float32(2*(t0-t1) + m0 + m1)
	}
	return c
})
