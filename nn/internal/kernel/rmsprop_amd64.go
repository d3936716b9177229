//go:build !purego

package kernel

//go:noescape
func rmspropAVX(w, grad, sq *float32, n int, c *[4]float32)

//go:noescape
func rmspropCenteredAVX(w, grad, sq, avg *float32, n int, c *[4]float32)

func rmspropAsm(w, g, sq []float32, n int, c *[4]float32) { rmspropAVX(&w[0], &g[0], &sq[0], n, c) }

func rmspropCenteredAsm(w, g, sq, avg []float32, n int, c *[4]float32) {
	rmspropCenteredAVX(&w[0], &g[0], &sq[0], &avg[0], n, c)
}
