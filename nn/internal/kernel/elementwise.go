package kernel

import "math"

// ReluBackward writes dx[i] = dy[i]·1[y[i] > 0] for i < len(dy).
func ReluBackward(useAsm bool, dx, dy, y []float32) { reluBackwardOn(on(useAsm), dx, dy, y) }

func reluBackwardOn(l Level, dx, dy, y []float32) {
	n := len(dy)
	dx, y = dx[:n], y[:n]
	i := 0
	if l >= AVX2FMA && n >= 8 {
		i = n &^ 7
		reluBackAsm(dx, dy, y, i)
	}
	for ; i < n; i++ {
		if y[i] > 0 {
			dx[i] = dy[i]
		} else {
			dx[i] = 0
		}
	}
}

// Transpose writes the transpose of src (rows×cols, row-major) into dst
// (cols×rows). On the assembly paths the 8×8 blocks go through AVX
// register transposes; the rest (and the portable path) is copied in 16×16
// blocks so both sides stay in cache. Only values move, so every path
// gives the same bits.
func Transpose(dst, src []float32, rows, cols int) { transposeOn(active, dst, src, rows, cols) }

func transposeOn(l Level, dst, src []float32, rows, cols int) {
	if rows == 0 || cols == 0 {
		return
	}
	_ = src[rows*cols-1]
	_ = dst[rows*cols-1]
	if l >= AVX2FMA && rows >= 8 && cols >= 8 {
		transposeAsm(dst, src, rows, cols)
		r8, c8 := rows&^7, cols&^7
		transposeGo(dst, src, rows, cols, 0, r8, c8, cols)
		transposeGo(dst, src, rows, cols, r8, rows, 0, cols)
		return
	}
	transposeGo(dst, src, rows, cols, 0, rows, 0, cols)
}

// transposeGo transposes src's rows [r0, r1) × columns [c0, c1) into dst.
func transposeGo(dst, src []float32, rows, cols, r0, r1, c0, c1 int) {
	const blk = 16
	for i0 := r0; i0 < r1; i0 += blk {
		i1 := min(i0+blk, r1)
		for j0 := c0; j0 < c1; j0 += blk {
			j1 := min(j0+blk, c1)
			for i := i0; i < i1; i++ {
				row := src[i*cols+j0 : i*cols+j1]
				for j, v := range row {
					dst[(j0+j)*rows+i] = v
				}
			}
		}
	}
}

// Tanh writes tanh(src[i]) into dst[i], as x·P(x²)/Q(x²) with x clamped to
// ±9 (see tanh_coef.go); maximum relative error about 6e-7.
func Tanh(useAsm bool, dst, src []float32) { tanhOn(on(useAsm), dst, src) }

func tanhOn(l Level, dst, src []float32) {
	n := len(src)
	dst = dst[:n]
	if l >= AVX2FMA {
		i := n &^ 7
		if i > 0 {
			tanhAsm(dst, src, i)
		}
		if i < n {
			// The tail goes through the same instructions via a padded
			// copy, so an element's bits do not depend on where it sits.
			var t [8]float32
			copy(t[:], src[i:])
			tanhAsm(t[:], t[:], 8)
			copy(dst[i:], t[:])
		}
		return
	}
	for i := range dst {
		dst[i] = Tanh1(src[i])
	}
}

// Tanh1 is the scalar form of Tanh.
func Tanh1(x float32) float32 {
	x = min(max(x, -9), 9)
	y := x * x
	p := ((((tanhP5*y+tanhP4)*y+tanhP3)*y+tanhP2)*y+tanhP1)*y + tanhP0
	q := (((((tanhQ6*y+tanhQ5)*y+tanhQ4)*y+tanhQ3)*y+tanhQ2)*y+tanhQ1)*y + tanhQ0
	return x * p / q
}

// TanhBackward writes dx[i] = dy[i]·(1 − y[i]²).
func TanhBackward(useAsm bool, dx, dy, y []float32) { tanhBackwardOn(on(useAsm), dx, dy, y) }

func tanhBackwardOn(l Level, dx, dy, y []float32) {
	n := len(dy)
	dx, y = dx[:n], y[:n]
	if l >= AVX2FMA {
		i := n &^ 7
		if i > 0 {
			tanhBackAsm(dx, dy, y, i)
		}
		if i < n {
			var a, b [8]float32
			copy(a[:], dy[i:])
			copy(b[:], y[i:])
			tanhBackAsm(a[:], a[:], b[:], 8)
			copy(dx[i:], a[:])
		}
		return
	}
	for i := range dx {
		dx[i] = dy[i] * (1 - y[i]*y[i])
	}
}

// Adam applies one Adam step without weight decay to w given g, updating
// the moments m and v in place:
//
//	m ← β1·m + (1−β1)·g,  v ← β2·v + (1−β2)·g²,  w ← w − step·m/(√v·rbc2 + ε)
//
// step = lr/(1−β1ᵗ) and rbc2 = 1/√(1−β2ᵗ) are computed by the caller.
// Each element always takes the same path (SIMD body or scalar tail) for
// a given length, so results are reproducible. The AVX-512 body runs the
// AVX2 body's operations on 16 lanes and leaves the same 8-aligned tail to
// the AVX2 body and the scalar loop, so both paths give the same bits.
// Both SIMD bodies flush subnormals to zero (a moment below 2⁻¹²⁶, which a
// gradient that stays near zero produces, becomes 0): CPUs handle them on
// a slow path an order of magnitude slower, and a value that small changes
// no update.
func Adam(useAsm bool, w, g, m, v []float32, b1, b2, eps, step, rbc2 float32) {
	adamOn(on(useAsm), w, g, m, v, b1, b2, eps, step, rbc2)
}

func adamOn(l Level, w, g, m, v []float32, b1, b2, eps, step, rbc2 float32) {
	n := len(w)
	g, m, v = g[:n], m[:n], v[:n]
	i := 0
	if l >= AVX2FMA && n >= 8 {
		c := [7]float32{b1, 1 - b1, b2, 1 - b2, eps, step, rbc2}
		if l >= AVX512 && n >= 16 {
			i = n &^ 15
			adamZAsm(w, g, m, v, i, &c)
		}
		if j := n &^ 7; j > i {
			adamAsm(w[i:], g[i:], m[i:], v[i:], j-i, &c)
			i = j
		}
	}
	for ; i < n; i++ {
		gi := g[i]
		mi := b1*m[i] + (1-b1)*gi
		vi := b2*v[i] + (1-b2)*gi*gi
		m[i], v[i] = mi, vi
		w[i] -= step * mi / (float32(math.Sqrt(float64(vi)))*rbc2 + eps)
	}
}
