package kernel

import "math"

// RMSProp applies one RMSProp step (PyTorch's form) to w given g, updating
// the running mean square sq in place, and, when avg is not nil (the
// centered form), the running mean gradient avg:
//
//	sq ← α·sq + (1−α)·g²,  avg ← α·avg + (1−α)·g,
//	w ← w − lr·g/(√(sq − avg²) + ε)   (centered; √sq without avg)
//
// A centered step with g = 0 leaves w as it is. The SIMD body performs the
// same float32 operations in the same order as the scalar loop, without
// fused multiply-adds, so both give the same bits; the centered step's
// products of subnormal state values are computed exactly without the
// FPU's slow path (centeredStep).
func RMSProp(useAsm bool, w, g, sq, avg []float32, alpha, lr, eps float32) {
	rmspropOn(on(useAsm), w, g, sq, avg, alpha, lr, eps)
}

func rmspropOn(l Level, w, g, sq, avg []float32, alpha, lr, eps float32) {
	n := len(w)
	g, sq = g[:n], sq[:n]
	c := [4]float32{alpha, 1 - alpha, lr, eps}
	i := 0
	if l >= AVX2FMA && n >= 8 && avg == nil {
		i = n &^ 7
		rmspropAsm(w, g, sq, i, &c)
	}
	a, b := c[0], c[1]
	if avg == nil {
		for ; i < n; i++ {
			gi := g[i]
			v := float32(a*sq[i]) + float32(float32(b*gi)*gi)
			sq[i] = v
			w[i] -= float32(lr*gi) / (float32(math.Sqrt(float64(v))) + eps)
		}
		return
	}
	avg = avg[:n]
	if l >= AVX2FMA {
		// The assembly stops before a block of 8 holding a subnormal
		// state value; centeredStep takes that block.
		for n8 := n &^ 7; i < n8; i += 8 {
			if i += rmspropCenteredAsm(w[i:], g[i:], sq[i:], avg[i:], n8-i, &c); i == n8 {
				break
			}
			for j := i; j < i+8; j++ {
				centeredStep(&w[j], g[j], &sq[j], &avg[j], a, b, lr, eps)
			}
		}
	}
	for ; i < n; i++ {
		centeredStep(&w[i], g[i], &sq[i], &avg[i], a, b, lr, eps)
	}
}

// centeredStep is one element of the centered step. Where the gradient is
// 0 the running means only decay, and one that has decayed below
// float32's normal range (a subnormal: an element whose gradient has been
// 0 for a thousand steps) would send each multiply through the FPU's
// slow microcode assist; scaleSub computes those products exactly without
// it, and w is left as it is.
func centeredStep(w *float32, gi float32, sq, avg *float32, a, b, lr, eps float32) {
	bg := b * gi
	if gi == 0 {
		// v = a·sq + (b·g)·g = a·sq + 0 and sq ≥ 0, so v = a·sq.
		*sq = scaleSub(a, *sq)
		// m = a·avg + b·g, where b·g is a zero of g's sign.
		if m := scaleSub(a, *avg); math.Float32bits(m)&0x7fffffff != 0 {
			*avg = m
		} else {
			*avg = m + bg
		}
		return
	}
	v := float32(a**sq) + float32(bg*gi)
	m := float32(a**avg) + bg
	*sq, *avg = v, m
	*w -= float32(lr*gi) / (float32(math.Sqrt(float64(v-float32(m*m)))) + eps)
}

// scaleSub returns the float32 product a·x for 0 ≤ a < 1. A subnormal
// (or zero) x is k·2⁻¹⁴⁹ for an integer k < 2²³, and so is the product,
// rounded to the nearest multiple (ties to even) as IEEE rounds it:
// a·k is exact in float64, and math.RoundToEven rounds it once.
func scaleSub(a, x float32) float32 {
	bits := math.Float32bits(x)
	if bits&0x7f800000 != 0 {
		return a * x
	}
	k := math.RoundToEven(float64(a) * float64(bits&0x7fffff))
	return math.Float32frombits(bits&0x80000000 | uint32(k))
}
