package kernel

import (
	"math"
	"testing"

	"herd/internal/rng"
)

// TestRMSPropSameBits runs the SIMD and scalar RMSProp on the same data,
// plain and centered, over lengths that exercise the tail, with a third of
// the gradients zero, and checks every weight and moment bit for bit
// against an independent scalar transcription of the update.
func TestRMSPropSameBits(t *testing.T) {
	r := rng.New(1, "kernel/rmsprop", 0)
	const alpha, lr, eps = 0.95, 2.5e-4, 0.01
	for _, n := range []int{1, 7, 8, 9, 64, 131} {
		for _, centered := range []bool{false, true} {
			g := make([]float32, n)
			w0 := make([]float32, n)
			sq0 := make([]float32, n)
			avg0 := make([]float32, n)
			for i := range n {
				if i%3 != 0 {
					g[i] = float32(r.NormFloat64())
				}
				w0[i] = float32(r.NormFloat64())
				sq0[i] = float32(r.Float64())
				avg0[i] = float32(r.Float64()) * 0.1
			}
			// The reference: the update as PyTorch writes it, one element at a time.
			wantW, wantSq, wantAvg := append([]float32(nil), w0...), append([]float32(nil), sq0...), append([]float32(nil), avg0...)
			for i, gi := range g {
				b := float32(1 - float32(alpha))
				wantSq[i] = float32(float32(alpha)*wantSq[i]) + float32(float32(b*gi)*gi)
				den := wantSq[i]
				if centered {
					wantAvg[i] = float32(float32(alpha)*wantAvg[i]) + float32(b*gi)
					den = wantSq[i] - float32(wantAvg[i]*wantAvg[i])
					if gi == 0 {
						continue
					}
				}
				wantW[i] -= float32(float32(lr)*gi) / (float32(math.Sqrt(float64(den))) + eps)
			}
			for _, path := range Levels() {
				w, sq, avg := append([]float32(nil), w0...), append([]float32(nil), sq0...), append([]float32(nil), avg0...)
				a := avg
				if !centered {
					a = nil
				}
				rmspropOn(path, w, g, sq, a, alpha, lr, eps)
				for i := range n {
					if math.Float32bits(w[i]) != math.Float32bits(wantW[i]) || math.Float32bits(sq[i]) != math.Float32bits(wantSq[i]) ||
						centered && math.Float32bits(avg[i]) != math.Float32bits(wantAvg[i]) {
						t.Fatalf("n %d centered %v asm %v: element %d w %v sq %v avg %v, want %v %v %v",
							n, centered, path, i, w[i], sq[i], avg[i], wantW[i], wantSq[i], wantAvg[i])
					}
				}
			}
		}
	}
}

func BenchmarkRMSProp(b *testing.B) {
	const n = 132000 // MinAtar's DQN network
	w, g, sq, avg := make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n)
	r := rng.New(1, "kernel/rmsprop-bench", 0)
	for i := range g {
		g[i] = float32(r.NormFloat64()) * 1e-3
	}
	for _, c := range []struct {
		name string
		asm  bool
	}{{"go", false}, {"asm", true}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(4 * 4 * n)
			for range b.N {
				RMSProp(c.asm, w, g, sq, avg, 0.95, 2.5e-4, 0.01)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/param")
		})
	}
}
