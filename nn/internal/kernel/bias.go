package kernel

// AddBias adds b to every x[i] and then, with relu, replaces each sum s by
// Go's max(s, 0): NaN stays NaN and −0 becomes +0. Both paths do one
// float32 add per element (and the same select), so they give the same
// bits.
func AddBias(useAsm bool, x []float32, b float32, relu bool) { addBiasOn(on(useAsm), x, b, relu) }

func addBiasOn(l Level, x []float32, b float32, relu bool) {
	i := 0
	if l >= AVX2FMA && len(x) >= 8 {
		i = len(x) &^ 7
		addBiasAsm(x[:i], b, relu)
	}
	for ; i < len(x); i++ {
		s := x[i] + b
		if relu {
			s = max(s, 0)
		}
		x[i] = s
	}
}
