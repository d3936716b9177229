//go:build !amd64 || purego

package kernel

// maxLevel is Portable off amd64 and in purego builds.
const maxLevel = Portable

func gemmAsm(z bool, transA bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, acc bool, bias []float32, relu bool) {
	GemmGo(transA, m, n, k, a, lda, b, ldb, c, ldc, acc, bias, relu)
}

func reluBackAsm(dx, dy, y []float32, n int) {}

func tanhAsm(dst, src []float32, n int)      {}
func tanhBackAsm(dx, dy, y []float32, n int) {}

func adamAsm(w, g, m, v []float32, n int, c *[7]float32) {}

func adamZAsm(w, g, m, v []float32, n int, c *[7]float32) {}

func fmaLoop(l Level, n int) int { return 0 }

func transposeAsm(dst, src []float32, rows, cols int) {}
