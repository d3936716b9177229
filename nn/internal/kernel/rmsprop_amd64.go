//go:build !purego

package kernel

//go:noescape
func rmspropAVX(w, grad, sq *float32, n int, c *[4]float32)

//go:noescape
func rmspropCenteredAVX(w, grad, sq, avg *float32, n int, c *[4]float32) (done int)

func rmspropAsm(w, g, sq []float32, n int, c *[4]float32) { rmspropAVX(&w[0], &g[0], &sq[0], n, c) }

// rmspropCenteredAsm steps the first n (a multiple of 8) elements up to the
// first block of 8 whose sq or avg holds a subnormal, and returns how many
// it stepped.
func rmspropCenteredAsm(w, g, sq, avg []float32, n int, c *[4]float32) int {
	return rmspropCenteredAVX(&w[0], &g[0], &sq[0], &avg[0], n, c)
}
