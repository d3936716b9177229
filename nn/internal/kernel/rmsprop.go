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
// fused multiply-adds, so both give the same bits.
func RMSProp(useAsm bool, w, g, sq, avg []float32, alpha, lr, eps float32) {
	rmspropOn(on(useAsm), w, g, sq, avg, alpha, lr, eps)
}

func rmspropOn(l Level, w, g, sq, avg []float32, alpha, lr, eps float32) {
	n := len(w)
	g, sq = g[:n], sq[:n]
	c := [4]float32{alpha, 1 - alpha, lr, eps}
	i := 0
	if l >= AVX2FMA && n >= 8 {
		i = n &^ 7
		if avg != nil {
			rmspropCenteredAsm(w, g, sq, avg[:n], i, &c)
		} else {
			rmspropAsm(w, g, sq, i, &c)
		}
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
	for ; i < n; i++ {
		gi := g[i]
		bg := b * gi
		v := float32(a*sq[i]) + float32(bg*gi)
		m := float32(a*avg[i]) + bg
		sq[i], avg[i] = v, m
		if gi == 0 {
			continue
		}
		w[i] -= float32(lr*gi) / (float32(math.Sqrt(float64(v-float32(m*m)))) + eps)
	}
}
