package kernel

// SumSquares returns Σ x[i]² in float64. The whole blocks of 32 elements
// are summed in 32 partial sums (element i into sum i mod 32, in index
// order), which are then added in a fixed tree; the last len(x) mod 32
// elements are added one by one after that. Each x[i]² is exact in
// float64 (a float32 square has at most 48 significant bits), so the SIMD
// body's fused multiply-adds round exactly as the Go loop's adds, and
// every path gives the same bits.
//
// Why partial sums: one float64 chain costs an add's latency per element,
// several microseconds for a 10k-parameter network (a PPO minibatch's
// gradient-norm clip), where 32 independent sums run at the load rate.
func SumSquares(useAsm bool, x []float32) float64 { return sumSquaresOn(on(useAsm), x) }

func sumSquaresOn(l Level, x []float32) float64 {
	nb := len(x) &^ 31
	var s float64
	if l >= AVX2FMA && nb > 0 {
		s = sumSquaresAsm(x, nb)
	} else if nb > 0 {
		s = sumSquaresGo(x[:nb])
	}
	for _, v := range x[nb:] {
		s += float64(v) * float64(v)
	}
	return s
}

// sumSquaresGo is the blocks' sum of SumSquares: the reference the
// assembly matches. len(x) is a multiple of 32.
func sumSquaresGo(x []float32) float64 {
	// Eight sums at a time in locals: eight independent chains, where an
	// array of 32 in memory would chain each add to a store and a load.
	var p [32]float64
	for j := 0; j < 32; j += 8 {
		var s0, s1, s2, s3, s4, s5, s6, s7 float64
		for b := j; b+8 <= len(x); b += 32 {
			r := x[b : b+8 : b+8]
			s0 += float64(r[0]) * float64(r[0])
			s1 += float64(r[1]) * float64(r[1])
			s2 += float64(r[2]) * float64(r[2])
			s3 += float64(r[3]) * float64(r[3])
			s4 += float64(r[4]) * float64(r[4])
			s5 += float64(r[5]) * float64(r[5])
			s6 += float64(r[6]) * float64(r[6])
			s7 += float64(r[7]) * float64(r[7])
		}
		p[j], p[j+1], p[j+2], p[j+3], p[j+4], p[j+5], p[j+6], p[j+7] = s0, s1, s2, s3, s4, s5, s6, s7
	}
	// The tree: t_l = (p_l + p_{l+8}) + (p_{l+16} + p_{l+24}) for l < 8,
	// then t_l + t_{l+4}, then u_l + u_{l+2}, then the two left.
	var t [8]float64
	for l := range t {
		t[l] = (p[l] + p[l+8]) + (p[l+16] + p[l+24])
	}
	var u [4]float64
	for l := range u {
		u[l] = t[l] + t[l+4]
	}
	return (u[0] + u[2]) + (u[1] + u[3])
}

// Scale multiplies every element of x by c in place.
func Scale(useAsm bool, x []float32, c float32) { scaleOn(on(useAsm), x, c) }

func scaleOn(l Level, x []float32, c float32) {
	i := 0
	if l >= AVX2FMA && len(x) >= 8 {
		i = len(x) &^ 7
		scaleAsm(x, i, c)
	}
	for ; i < len(x); i++ {
		x[i] *= c
	}
}
