//go:build !amd64 || purego

package kernel

func rmspropAsm(w, g, sq []float32, n int, c *[4]float32)                  {}
func rmspropCenteredAsm(w, g, sq, avg []float32, n int, c *[4]float32) int { return 0 }
