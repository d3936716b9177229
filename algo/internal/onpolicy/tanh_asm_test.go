package onpolicy

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// requireAVX2 skips where tanhTo has only the Go loop: nothing to compare.
func requireAVX2(t testing.TB) {
	t.Helper()
	if !haveAVX2 {
		t.Skip("no AVX2 kernel on this machine")
	}
}

// tanhPaths runs f with each kernel the machine has doing the bulk of
// tanhTo: AVX-512 (where there is one) and AVX2.
func tanhPaths(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	for _, z := range []bool{true, false} {
		if z && !haveAVX512 {
			continue
		}
		name := "avx2"
		if z {
			name = "avx512"
		}
		t.Run(name, func(t *testing.T) {
			defer func(v bool) { haveAVX512 = v }(haveAVX512)
			haveAVX512 = z
			f(t)
		})
	}
}

// matchTanh checks that tanhTo (the kernel for the multiples of 8) and
// tanhToGo give the same bits for every element of x.
func matchTanh(t testing.TB, x, got, want []float32) {
	t.Helper()
	tanhTo(got, x)
	tanhToGo(want, x)
	for i := range x {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("tanh(%#08x = %g): asm %#08x, Go %#08x", math.Float32bits(x[i]), x[i],
				math.Float32bits(got[i]), math.Float32bits(want[i]))
		}
	}
}

var tanhAll = flag.Bool("tanh.all", false, "TestTanhAsmMatchesGo: every float32 bit pattern (~40 s)")

// TestTanhAsmMatchesGo compares the AVX-512 and AVX2 kernels with the Go
// loop on float32 bit patterns in blocks of 64k: every 61st of the 2³²
// (every exponent, both signs, NaNs and subnormals among them; ~7e7
// values) by default, every 4093rd with -short or under the race detector
// (which slows the Go loop ~10x), and all of them with -tanh.all — 37 s
// per kernel on a loaded 2-core machine, too long for every go test;
// docs/BENCHMARKS.md records it passing. TestTanhAsmSpecials adds the
// edges.
func TestTanhAsmMatchesGo(t *testing.T) {
	requireAVX2(t)
	tanhPaths(t, matchAllTanh)
}

func matchAllTanh(t *testing.T) {
	const block = 1 << 16
	stride := uint64(61)
	switch {
	case *tanhAll:
		stride = 1
	case testing.Short() || raceEnabled:
		stride = 4093
	}
	x := make([]float32, block)
	got, want := make([]float32, block), make([]float32, block)
	var b uint64
	for b < 1<<32 {
		n := 0
		for ; n < block && b < 1<<32; b += stride {
			x[n] = math.Float32frombits(uint32(b))
			n++
		}
		n &^= 15 // keep every element on the kernel
		matchTanh(t, x[:n], got[:n], want[:n])
	}
}

// TestTanhAsmSpecials puts the edge inputs on the kernels at every lane.
func TestTanhAsmSpecials(t *testing.T) {
	requireAVX2(t)
	tanhPaths(t, matchSpecialTanh)
}

func matchSpecialTanh(t *testing.T) {
	inf := float32(math.Inf(1))
	xs := []float32{0, float32(math.Copysign(0, -1)), inf, -inf,
		math.Float32frombits(0x7fc00000), math.Float32frombits(0xffc00000), // quiet NaNs
		math.Float32frombits(0x7f800001), math.Float32frombits(0xff800001), // signalling NaNs
		math.Float32frombits(1), math.Float32frombits(0x807fffff), // subnormals
		math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32,
		tanhMax, -tanhMax,
		math.Nextafter32(tanhMax, 0), math.Nextafter32(tanhMax, 20),
		-math.Nextafter32(tanhMax, 0), -math.Nextafter32(tanhMax, 20)}
	for k := 0; k <= tanhPieces; k++ {
		edge := float32(k) / tanhPerUnit
		xs = append(xs, edge, -edge, math.Nextafter32(edge, -1), math.Nextafter32(edge, 20))
	}
	for _, v := range xs {
		for lane := range 16 {
			var x, got, want [16]float32
			for i := range x {
				x[i] = float32(i) * 0.37
			}
			x[lane] = v
			matchTanh(t, x[:], got[:], want[:])
		}
	}
}

// TestTanhAsmLengths covers every length 0..40 at every start offset 0..7,
// so tails and unaligned loads are both exercised, and checks that tanhTo
// writes nothing past len(x).
func TestTanhAsmLengths(t *testing.T) { tanhPaths(t, matchTanhLengths) }

func matchTanhLengths(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	src := make([]float32, 64)
	for i := range src {
		src[i] = float32(r.NormFloat64() * 4)
	}
	const guard = 12345
	for off := range 8 {
		for n := 0; n <= 40; n++ {
			x := src[off : off+n]
			buf := make([]float32, off+n+1)
			buf[off+n] = guard
			got := tanhTo(buf[off:off+n], x)
			want := make([]float32, n)
			tanhToGo(want, x)
			for i := range x {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("off %d n %d i %d: %g vs %g", off, n, i, got[i], want[i])
				}
			}
			if buf[off+n] != guard {
				t.Fatalf("off %d n %d: wrote past the end", off, n)
			}

			dy, y := src[off+1:off+1+n], x
			dx := make([]float32, off+n+1)
			dx[off+n] = guard
			tanhBackward(dx[off:off+n], dy, y)
			wb := make([]float32, n)
			tanhBackwardGo(wb, dy, y)
			for i := range wb {
				if math.Float32bits(dx[off+i]) != math.Float32bits(wb[i]) {
					t.Fatalf("backward off %d n %d i %d: %g vs %g", off, n, i, dx[off+i], wb[i])
				}
			}
			if dx[off+n] != guard {
				t.Fatalf("backward off %d n %d: wrote past the end", off, n)
			}
		}
	}
}

// TestTanhBackAsmMatchesGo compares the backward kernels with the Go loop
// on 1e6 random (dy, y) bit patterns plus y in [−1, 1], where they run.
func TestTanhBackAsmMatchesGo(t *testing.T) {
	requireAVX2(t)
	tanhPaths(t, matchTanhBack)
}

func matchTanhBack(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const n = 1 << 20
	dy, y := make([]float32, n), make([]float32, n)
	for i := range y {
		dy[i] = math.Float32frombits(r.Uint32())
		if i%2 == 0 {
			y[i] = math.Float32frombits(r.Uint32())
		} else {
			y[i] = float32(r.Float64()*2 - 1)
		}
	}
	got, want := make([]float32, n), make([]float32, n)
	tanhBackward(got, dy, y)
	tanhBackwardGo(want, dy, y)
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) &&
			!(got[i] != got[i] && want[i] != want[i]) {
			t.Fatalf("dy %g y %g: asm %g, Go %g", dy[i], y[i], got[i], want[i])
		}
	}
}

// FuzzTanhAsm compares kernel and Go on 8 arbitrary bit patterns (one
// kernel step) and on the backward pass of the same values.
func FuzzTanhAsm(f *testing.F) {
	f.Add(uint32(0), uint32(0x80000000), uint32(0x7fc00000), uint32(0x41200000),
		uint32(0x3d000000), uint32(1), uint32(0xff800000), uint32(0x3f800000))
	f.Fuzz(func(t *testing.T, a, b, c, d, e, g, h, i uint32) {
		requireAVX2(t)
		var x, got, want [8]float32
		for j, v := range [8]uint32{a, b, c, d, e, g, h, i} {
			x[j] = math.Float32frombits(v)
		}
		matchTanh(t, x[:], got[:], want[:])
		var dy [8]float32
		for j := range dy {
			dy[j] = x[7-j]
		}
		tanhBackward(got[:], dy[:], want[:])
		var wb [8]float32
		tanhBackwardGo(wb[:], dy[:], want[:])
		if fmt.Sprint(got) != fmt.Sprint(wb) {
			t.Fatalf("backward: %v vs %v", got, wb)
		}
	})
}

// BenchmarkTanhTo compares the Go loop with tanhTo (the kernel where
// there is one) at a minibatch row (64), a few rows (256) and a large
// batch (8192).
func BenchmarkTanhTo(b *testing.B) {
	for _, n := range []int{64, 256, 8192} {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(i-n/2) / float32(n/8)
		}
		dst := make([]float32, n)
		b.Run(fmt.Sprintf("go/n=%d", n), func(b *testing.B) {
			b.SetBytes(int64(4 * n))
			for b.Loop() {
				tanhToGo(dst, x)
			}
		})
		b.Run(fmt.Sprintf("asm/n=%d", n), func(b *testing.B) {
			b.SetBytes(int64(4 * n))
			for b.Loop() {
				tanhTo(dst, x)
			}
		})
	}
}

// BenchmarkTanhBackward is BenchmarkTanhTo for the backward pass.
func BenchmarkTanhBackward(b *testing.B) {
	for _, n := range []int{64, 256, 8192} {
		y, dy, dx := make([]float32, n), make([]float32, n), make([]float32, n)
		for i := range y {
			y[i] = float32(i-n/2) / float32(n)
			dy[i] = float32(i%7) - 3
		}
		b.Run(fmt.Sprintf("go/n=%d", n), func(b *testing.B) {
			b.SetBytes(int64(4 * n))
			for b.Loop() {
				tanhBackwardGo(dx, dy, y)
			}
		})
		b.Run(fmt.Sprintf("asm/n=%d", n), func(b *testing.B) {
			b.SetBytes(int64(4 * n))
			for b.Loop() {
				tanhBackward(dx, dy, y)
			}
		})
	}
}

// BenchmarkTanhPaths compares the AVX-512 and AVX2 kernels on a rollout
// step's layer (256) and a large batch.
func BenchmarkTanhPaths(b *testing.B) {
	for _, n := range []int{256, 8192} {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(i-n/2) / float32(n/8)
		}
		dst := make([]float32, n)
		for _, z := range []bool{false, true} {
			if z && !haveAVX512 {
				continue
			}
			b.Run(fmt.Sprintf("avx512=%v/n=%d", z, n), func(b *testing.B) {
				defer func(v bool) { haveAVX512 = v }(haveAVX512)
				haveAVX512 = z
				b.SetBytes(int64(4 * n))
				for b.Loop() {
					tanhTo(dst, x)
				}
			})
		}
	}
}
