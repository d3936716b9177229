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

// TestRMSPropSubnormalState: the centered step on state values below
// float32's normal range (and ±0, and −0 gradients), at α values whose
// products round up, down and to even, gives the bits of the update as
// PyTorch writes it, computed by the FPU itself, on every path and at
// every position of a block of 8.
func TestRMSPropSubnormalState(t *testing.T) {
	r := rng.New(2, "kernel/rmsprop", 0)
	negZero := float32(math.Copysign(0, -1))
	sub := func() float32 {
		var k uint32
		switch r.IntN(3) {
		case 0:
			k = uint32(1 + r.IntN(12)) // the smallest, where a·k rounds back to k or to a neighbour
		case 1:
			k = uint32(1 + r.IntN(1<<23-1))
		default:
			k = 1<<23 - uint32(1+r.IntN(8))
		}
		if r.IntN(2) == 0 {
			k |= 1 << 31
		}
		return math.Float32frombits(k)
	}
	for _, alpha := range []float32{0.95, 0.5, 0.75, 0, 0.99} {
		const n = 67
		g, w0, sq0, avg0 := make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n)
		for i := range n {
			w0[i] = float32(r.NormFloat64())
			switch i % 5 {
			case 0, 1:
				g[i] = 0
			case 2:
				g[i] = negZero
			case 3:
				g[i] = float32(r.NormFloat64())
			default:
				g[i] = float32(r.NormFloat64()) * 1e-20
			}
			sq0[i] = float32(math.Abs(float64(sub())))
			avg0[i] = sub()
			switch r.IntN(6) {
			case 0:
				sq0[i], avg0[i] = float32(r.Float64()), float32(r.NormFloat64())*0.1
			case 1:
				avg0[i] = negZero
			case 2:
				sq0[i], avg0[i] = 0, 0
			}
			if i/8%3 == 1 {
				// Whole blocks of normal values between the others: the
				// assembly resumes after the blocks it left.
				sq0[i], avg0[i] = float32(r.Float64()), float32(r.NormFloat64())*0.1
			}
		}
		b := 1 - alpha
		wantW, wantSq, wantAvg := append([]float32(nil), w0...), append([]float32(nil), sq0...), append([]float32(nil), avg0...)
		for i, gi := range g {
			wantSq[i] = float32(alpha*wantSq[i]) + float32(float32(b*gi)*gi)
			wantAvg[i] = float32(alpha*wantAvg[i]) + float32(b*gi)
			if gi == 0 {
				continue
			}
			den := wantSq[i] - float32(wantAvg[i]*wantAvg[i])
			wantW[i] -= float32(2.5e-4*gi) / (float32(math.Sqrt(float64(den))) + 0.01)
		}
		for _, path := range Levels() {
			w, sq, avg := append([]float32(nil), w0...), append([]float32(nil), sq0...), append([]float32(nil), avg0...)
			rmspropOn(path, w, g, sq, avg, alpha, 2.5e-4, 0.01)
			for i := range n {
				if math.Float32bits(w[i]) != math.Float32bits(wantW[i]) || math.Float32bits(sq[i]) != math.Float32bits(wantSq[i]) ||
					math.Float32bits(avg[i]) != math.Float32bits(wantAvg[i]) {
					t.Fatalf("α %v path %v: element %d (g %v, sq %v, avg %v): w %v sq %v avg %v, want %v %v %v",
						alpha, path, i, g[i], sq0[i], avg0[i], w[i], sq[i], avg[i], wantW[i], wantSq[i], wantAvg[i])
				}
			}
		}
	}
}

// TestScaleSub: scaleSub(a, x) is the FPU's a·x for every subnormal x of a
// sweep and a spread of a in [0, 1).
func TestScaleSub(t *testing.T) {
	r := rng.New(3, "kernel/rmsprop", 0)
	for range 20000 {
		a := float32(r.Float64())
		if r.IntN(4) == 0 {
			a = float32(r.IntN(8)) / 8 // halves and eighths: exact ties
		}
		k := uint32(r.IntN(1 << 23))
		if r.IntN(3) == 0 {
			k = uint32(r.IntN(64))
		}
		x := math.Float32frombits(k | uint32(r.IntN(2))<<31)
		if got, want := scaleSub(a, x), a*x; math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("scaleSub(%v, %v) = %v (%#x), want %v (%#x)", a, x, got, math.Float32bits(got), want, math.Float32bits(want))
		}
	}
}
