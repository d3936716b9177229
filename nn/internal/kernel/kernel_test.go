package kernel

import (
	"math"
	"math/rand/v2"
	"testing"

	"herd/internal/rng"
)

// ref is the float64 triple loop the kernels are checked against.
func ref(transA bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, acc bool, bias []float32, relu bool) []float64 {
	out := make([]float64, m*n)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s float64
			switch {
			case acc:
				s = float64(c[i*ldc+j])
			case bias != nil:
				s = float64(bias[j])
			}
			for p := 0; p < k; p++ {
				var av float32
				if transA {
					av = a[p*lda+i]
				} else {
					av = a[i*lda+p]
				}
				s += float64(av) * float64(b[p*ldb+j])
			}
			if relu && s < 0 {
				s = 0
			}
			out[i*n+j] = s
		}
	}
	return out
}

// TestGemmMatchesReference runs both kernels over shapes that hit every
// edge (m % 4, n % 16, k = 0, 1, strided leading dimensions, both A
// layouts, all flag combinations) and checks every element, plus a guard
// band around C that must stay untouched.
func TestGemmMatchesReference(t *testing.T) {
	r := rng.New(1, "kernel/test", 0)
	dims := []int{1, 2, 3, 4, 5, 7, 8, 15, 16, 17, 31, 33, 64}
	ks := []int{0, 1, 3, 8, 16, 65}
	for _, path := range Levels() {
		for _, m := range dims {
			for _, n := range dims {
				for _, k := range ks {
					for mode := 0; mode < 16; mode++ {
						transA, acc, relu, withBias := mode&1 != 0, mode&2 != 0, mode&4 != 0, mode&8 != 0
						if acc && withBias {
							continue
						}
						lda := k + 2
						if transA {
							lda = m + 3
						}
						ldb, ldc := n+1, n+5
						arows := m
						if transA {
							arows = k
						}
						a := randSlice(r, max(arows*lda, 1))
						b := randSlice(r, max(k*ldb, 1))
						const guard = 19
						cfull := randSlice(r, m*ldc+2*guard)
						c := cfull[guard : guard+m*ldc]
						orig := append([]float32(nil), cfull...)
						var bias []float32
						if withBias {
							bias = randSlice(r, n)
						}
						want := ref(transA, m, n, k, a, lda, b, ldb, c, ldc, acc, bias, relu)
						gemmOn(path, transA, m, n, k, a, lda, b, ldb, c, ldc, acc, bias, relu)
						for i := 0; i < m; i++ {
							for j := 0; j < ldc; j++ {
								got := c[i*ldc+j]
								if j >= n {
									if got != orig[guard+i*ldc+j] {
										t.Fatalf("path=%v m=%d n=%d k=%d mode=%d: padding (%d,%d) changed", path, m, n, k, mode, i, j)
									}
									continue
								}
								w := want[i*n+j]
								if math.Abs(float64(got)-w) > 1e-4*(1+math.Abs(w)) {
									t.Fatalf("path=%v m=%d n=%d k=%d mode=%d: C[%d,%d]=%v want %v", path, m, n, k, mode, i, j, got, w)
								}
							}
						}
						for g := 0; g < guard; g++ {
							if cfull[g] != orig[g] || cfull[len(cfull)-1-g] != orig[len(cfull)-1-g] {
								t.Fatalf("path=%v m=%d n=%d k=%d mode=%d: guard band written", path, m, n, k, mode)
							}
						}
					}
				}
			}
		}
	}
}

// TestRowIndependence checks that a row's result does not depend on the
// batch it sits in (the duplicated-row tail trick must not change bits).
func TestRowIndependence(t *testing.T) {
	for _, l := range Levels() {
		for _, n := range []int{37, 2, 8, 24, 64, 70, 84, 120, 130} {
			testRowIndependence(t, l, n)
		}
	}
}

func testRowIndependence(t *testing.T, l Level, n int) {
	r := rng.New(2, "kernel/test", n)
	const k = 29
	const rows = 19 // two 8-row tiles and a 4-row tile with a duplicated row
	a := randSlice(r, rows*k)
	b := randSlice(r, k*n)
	bias := randSlice(r, n)
	all := make([]float32, rows*n)
	gemmOn(l, false, rows, n, k, a, k, b, n, all, n, false, bias, true)
	for i := 0; i < rows; i++ {
		one := make([]float32, n)
		gemmOn(l, false, 1, n, k, a[i*k:], k, b, n, one, n, false, bias, true)
		for j := range one {
			if one[j] != all[i*n+j] {
				t.Fatalf("%v n=%d row %d col %d: %v alone vs %v in batch", l, n, i, j, one[j], all[i*n+j])
			}
		}
	}
}

// withZeros sets about a third of s to +0 or −0 (the ReLU and sign cases
// where a kernel could differ in bits) and returns it.
func withZeros(r *rand.Rand, s []float32) []float32 {
	for i := range s {
		switch r.IntN(6) {
		case 0:
			s[i] = 0
		case 1:
			s[i] = float32(math.Copysign(0, -1))
		}
	}
	return s
}

func randSlice(r interface{ NormFloat64() float64 }, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(r.NormFloat64())
	}
	return s
}

func BenchmarkGemm(b *testing.B) {
	r := rng.New(3, "kernel/bench", 0)
	for _, sz := range []struct{ m, n, k int }{{256, 64, 64}, {256, 120, 4}, {256, 84, 120}, {256, 256, 256}, {1, 64, 64}, {1, 84, 120}, {1, 256, 256}} {
		for _, path := range Levels() {
			name := path.String()
			a := randSlice(r, sz.m*sz.k)
			bb := randSlice(r, sz.k*sz.n)
			c := make([]float32, sz.m*sz.n)
			b.Run(name+"/"+itoa(sz.m)+"x"+itoa(sz.n)+"x"+itoa(sz.k), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					gemmOn(path, false, sz.m, sz.n, sz.k, a, sz.k, bb, sz.n, c, sz.n, false, nil, false)
				}
				b.ReportMetric(2*float64(sz.m*sz.n*sz.k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	s := ""
	for ; i > 0; i /= 10 {
		s = string(rune('0'+i%10)) + s
	}
	return s
}

func TestReluBackwardAndTranspose(t *testing.T) {
	r := rng.New(4, "kernel/test", 0)
	for _, n := range []int{0, 1, 7, 8, 9, 33} {
		dy, y := randSlice(r, n), randSlice(r, n)
		for _, path := range Levels() {
			dx := randSlice(r, n)
			reluBackwardOn(path, dx, dy, y)
			for i := range dx {
				want := float32(0)
				if y[i] > 0 {
					want = dy[i]
				}
				if dx[i] != want {
					t.Fatalf("n=%d path=%v: dx[%d]=%v want %v", n, path, i, dx[i], want)
				}
			}
		}
	}
	for _, sz := range [][2]int{{1, 1}, {3, 40}, {17, 16}, {64, 64}, {8, 8}, {120, 84}, {84, 2}, {9, 23}, {130, 7}, {16, 33}} {
		src := randSlice(r, sz[0]*sz[1])
		for _, path := range Levels() {
			dst := make([]float32, len(src))
			transposeOn(path, dst, src, sz[0], sz[1])
			for i := 0; i < sz[0]; i++ {
				for j := 0; j < sz[1]; j++ {
					if dst[j*sz[0]+i] != src[i*sz[1]+j] {
						t.Fatalf("%v path=%v: transpose wrong at (%d,%d)", sz, path, i, j)
					}
				}
			}
		}
	}
}

// TestTanh checks both implementations against math.Tanh over [−12, 12]
// (relative error ≤ 2e-6) and the backward formula.
func TestTanh(t *testing.T) {
	const n = 24001
	src := make([]float32, n)
	for i := range src {
		src[i] = float32(-12 + 24*float64(i)/(n-1))
	}
	for _, path := range Levels() {
		dst := make([]float32, n)
		tanhOn(path, dst, src)
		for i, x := range src {
			want := math.Tanh(float64(x))
			if math.Abs(float64(dst[i])-want) > 2e-6*math.Abs(want)+1e-30 || math.Abs(float64(dst[i])) > 1 {
				t.Fatalf("path=%v tanh(%v) = %v, want %v", path, x, dst[i], want)
			}
		}
		dy := make([]float32, n)
		for i := range dy {
			dy[i] = float32(i%7) - 3
		}
		dx := make([]float32, n)
		tanhBackwardOn(path, dx, dy, dst)
		for i := range dx {
			want := float64(dy[i]) * (1 - float64(dst[i])*float64(dst[i]))
			if math.Abs(float64(dx[i])-want) > 1e-6*(1+math.Abs(want)) {
				t.Fatalf("path=%v tanh backward %d: %v want %v", path, i, dx[i], want)
			}
		}
	}
}

func TestAdam(t *testing.T) {
	r := rng.New(5, "kernel/test", 0)
	for _, n := range []int{1, 8, 13, 16, 29, 37, 64} {
		w0, g := randSlice(r, n), randSlice(r, n)
		m0, v0 := randSlice(r, n), randSlice(r, n)
		for i := range v0 {
			v0[i] *= v0[i]
		}
		for _, path := range Levels() {
			w := append([]float32(nil), w0...)
			m := append([]float32(nil), m0...)
			v := append([]float32(nil), v0...)
			adamOn(path, w, g, m, v, 0.9, 0.999, 1e-8, 0.01, 1.2)
			for i := range w {
				// The coefficients as the kernels hold them: 1−β2 in
				// float32 is 1.3e-5 away from 0.001.
				b1, b2 := float32(0.9), float32(0.999)
				mi := float64(b1)*float64(m0[i]) + float64(1-b1)*float64(g[i])
				vi := float64(b2)*float64(v0[i]) + float64(1-b2)*float64(g[i])*float64(g[i])
				wi := float64(w0[i]) - 0.01*mi/(math.Sqrt(vi)*1.2+1e-8)
				if math.Abs(float64(w[i])-wi) > 1e-6*(1+math.Abs(wi)) || math.Abs(float64(m[i])-mi) > 1e-6 || math.Abs(float64(v[i])-vi) > 1e-6 {
					t.Fatalf("n=%d path=%v i=%d: w=%v m=%v v=%v, want %v %v %v", n, path, i, w[i], m[i], v[i], wi, mi, vi)
				}
			}
		}
	}
}

// TestAVX512SameBitsAsAVX2: the AVX-512 GEMM tiles and Adam give exactly
// the AVX2 path's bits, on the shapes RL uses (batch 1 to 256, widths 2 to
// 256 with every column tail, both layouts of A, every epilogue), so
// bit-identity fixtures recorded on either path hold on both.
func TestAVX512SameBitsAsAVX2(t *testing.T) {
	if maxLevel < AVX512 {
		t.Skip("no AVX-512F")
	}
	r := rng.New(6, "kernel/test", 0)
	for _, m := range []int{1, 2, 3, 5, 32, 129, 256} {
		for _, n := range []int{2, 7, 9, 16, 17, 33, 64, 84, 100, 120, 128, 200, 256} {
			for _, k := range []int{1, 4, 64, 84, 121} {
				for mode := 0; mode < 16; mode++ {
					transA, acc, relu, withBias := mode&1 != 0, mode&2 != 0, mode&4 != 0, mode&8 != 0
					if acc && withBias {
						continue
					}
					lda := k
					if transA {
						lda = m
					}
					a := randSlice(r, m*k)
					b := randSlice(r, k*n)
					c0 := randSlice(r, m*n)
					var bias []float32
					if withBias {
						bias = randSlice(r, n)
					}
					c2 := append([]float32(nil), c0...)
					c5 := append([]float32(nil), c0...)
					gemmOn(AVX2FMA, transA, m, n, k, a, lda, b, n, c2, n, acc, bias, relu)
					gemmOn(AVX512, transA, m, n, k, a, lda, b, n, c5, n, acc, bias, relu)
					for i := range c2 {
						if math.Float32bits(c2[i]) != math.Float32bits(c5[i]) {
							t.Fatalf("m=%d n=%d k=%d mode=%d: C[%d] avx2 %v avx512 %v", m, n, k, mode, i, c2[i], c5[i])
						}
					}
				}
			}
		}
	}
	for _, n := range []int{8, 15, 16, 24, 31, 33, 10920} {
		w, g, m, v := randSlice(r, n), randSlice(r, n), randSlice(r, n), randSlice(r, n)
		for i := range v {
			v[i] *= v[i]
		}
		state := [2][4][]float32{}
		for s, l := range []Level{AVX2FMA, AVX512} {
			st := [4][]float32{append([]float32(nil), w...), g, append([]float32(nil), m...), append([]float32(nil), v...)}
			for range 3 {
				adamOn(l, st[0], st[1], st[2], st[3], 0.9, 0.999, 1e-8, 0.01, 1.2)
			}
			state[s] = st
		}
		for q := range 4 {
			for i := range n {
				if math.Float32bits(state[0][q][i]) != math.Float32bits(state[1][q][i]) {
					t.Fatalf("adam n=%d array %d element %d: avx2 %v avx512 %v", n, q, i, state[0][q][i], state[1][q][i])
				}
			}
		}
	}
}

// TestChoose: HERD_KERNELS selects a path up to the fastest the CPU runs;
// anything else is an error naming the problem, and the fastest path runs.
func TestChoose(t *testing.T) {
	for _, c := range []struct {
		env     string
		max     Level
		want    Level
		wantErr bool
	}{
		{"", AVX512, AVX512, false},
		{"", Portable, Portable, false},
		{"avx2-fma", AVX512, AVX2FMA, false},
		{"portable", AVX512, Portable, false},
		{"avx512", AVX512, AVX512, false},
		{"avx512", AVX2FMA, AVX2FMA, true},
		{"avx2", AVX512, AVX512, true},
	} {
		got, err := choose(c.env, c.max)
		if got != c.want || (err != nil) != c.wantErr {
			t.Errorf("choose(%q, %v) = %v, %v; want %v, error %v", c.env, c.max, got, err, c.want, c.wantErr)
		}
	}
}

// BenchmarkAdamKernel measures one Adam step over the DQN CartPole
// network's 10,920 parameters in one slice, per path, with ordinary
// gradients and with tiny ones whose moments decay into float32
// subnormals.
func BenchmarkAdamKernel(b *testing.B) {
	r := rng.New(7, "kernel/bench", 0)
	const n = 10920
	for _, c := range []struct {
		name  string
		scale float32
	}{{"normal", 1e-2}, {"subnormal", 1e-30}} {
		for _, l := range Levels() {
			w, g := randSlice(r, n), randSlice(r, n)
			for i := range g {
				g[i] *= c.scale
			}
			m, v := make([]float32, n), make([]float32, n)
			b.Run(c.name+"/"+l.String(), func(b *testing.B) {
				for b.Loop() {
					adamOn(l, w, g, m, v, 0.9, 0.999, 1e-8, 1e-4, 1.1)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/param")
			})
		}
	}
}

// TestAdamFlushesSubnormals: the assembly paths run Adam with subnormals
// flushed to zero (a moment below 2⁻¹²⁶ becomes 0 instead of taking the
// CPU's slow path) and leave the caller's floating-point mode as it was:
// Go arithmetic after the call still produces subnormals.
func TestAdamFlushesSubnormals(t *testing.T) {
	for _, l := range Levels() {
		if l == Portable {
			continue
		}
		const n = 32
		w, g := make([]float32, n), make([]float32, n)
		m, v := make([]float32, n), make([]float32, n)
		for i := range g {
			g[i] = 2e-38
		}
		adamOn(l, w, g, m, v, 0.9, 0.999, 1e-8, 1e-3, 1)
		for i := range m {
			if m[i] != 0 || v[i] != 0 {
				t.Fatalf("%v: m[%d]=%v v[%d]=%v, want subnormals flushed to 0", l, i, m[i], i, v[i])
			}
		}
		x := g[0]
		if y := x * 1e-5; y == 0 {
			t.Fatalf("%v: 2e-38·1e-5 = 0 after the call: the flush-to-zero mode leaked", l)
		}
	}
}

// TestPeakFLOPs: the measured peak is a plausible per-core figure (between
// 1 and 1000 GFLOP/s: no CPU core that runs these kernels is outside it).
func TestPeakFLOPs(t *testing.T) {
	p := PeakFLOPs()
	if maxLevel == Portable {
		if p != 0 {
			t.Fatalf("portable peak %v, want 0", p)
		}
		return
	}
	if p < 1e9 || p > 1e12 {
		t.Fatalf("peak %.3g FLOP/s per core", p)
	}
	t.Logf("peak %.1f GFLOP/s per core", p/1e9)
}

// BenchmarkGemmTails times the column tails the AVX-512 path handles
// differently (a last tile of exactly 16 columns, fewer than 16, 17 to
// 31) and the transposed product of a backward pass, per path.
func BenchmarkGemmTails(b *testing.B) {
	r := rng.New(8, "kernel/bench", 0)
	for _, sz := range []struct {
		transA  bool
		m, n, k int
	}{{false, 128, 120, 4}, {false, 128, 84, 120}, {true, 120, 84, 128}, {false, 128, 120, 84}, {true, 4, 120, 128}, {false, 128, 84, 2}, {false, 128, 2, 84}, {true, 84, 2, 128}, {false, 64, 16, 36}, {true, 36, 16, 64}, {false, 256, 84, 120}, {false, 256, 120, 84}, {true, 256, 256, 256}, {false, 1, 256, 256}, {true, 4, 256, 256}, {false, 256, 256, 2}, {false, 256, 256, 4}, {false, 1, 64, 64}, {false, 128, 1, 64}, {true, 64, 1, 128}, {true, 64, 2, 128}} {
		for _, l := range Levels()[1:] {
			lda := sz.k
			if sz.transA {
				lda = sz.m
			}
			a, bb := randSlice(r, sz.m*sz.k), randSlice(r, sz.k*sz.n)
			c := make([]float32, sz.m*sz.n)
			name := itoa(sz.m) + "x" + itoa(sz.n) + "x" + itoa(sz.k)
			if sz.transA {
				name += "T"
			}
			b.Run(l.String()+"/"+name, func(b *testing.B) {
				for b.Loop() {
					gemmOn(l, sz.transA, sz.m, sz.n, sz.k, a, lda, bb, sz.n, c, sz.n, true, nil, false)
				}
				b.ReportMetric(2*float64(sz.m*sz.n*sz.k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// BenchmarkTranspose times the weight transposes of a backward pass (W of
// 120→84 and 84→2 layers, 64→64) per path.
func BenchmarkTranspose(b *testing.B) {
	r := rng.New(9, "kernel/bench", 0)
	for _, sz := range [][2]int{{120, 84}, {120, 80}, {128, 84}, {120, 88}, {84, 2}, {64, 64}, {256, 256}} {
		src := randSlice(r, sz[0]*sz[1])
		dst := make([]float32, len(src))
		for _, l := range Levels() {
			b.Run(l.String()+"/"+itoa(sz[0])+"x"+itoa(sz[1]), func(b *testing.B) {
				for b.Loop() {
					transposeOn(l, dst, src, sz[0], sz[1])
				}
			})
		}
	}
}

// TestTwoColumnsSameBits: the packed two-column kernel (n = 2, ldb = 2)
// gives exactly the bits of the general narrow kernel (the same product
// with B padded to ldb = 3), for every k mod 4, every epilogue, and
// signed zeros that a stray zero product would flip.
func TestTwoColumnsSameBits(t *testing.T) {
	paddedSameBits(t, 10, 2, []int{8, 16, 19, 128}, []int{1, 2, 3, 4, 5, 6, 7, 29, 84, 128})
}

// TestOneColumnSameBits: the one-column kernel (n = 1, ldb = 1) gives
// exactly the bits of the general narrow kernel (the same product with B
// padded to ldb = 2), for every k mod 4, every epilogue, and signed zeros
// that a stray zero product would flip.
func TestOneColumnSameBits(t *testing.T) {
	paddedSameBits(t, 11, 1, []int{1, 8, 16, 19, 128}, []int{1, 2, 3, 4, 5, 6, 7, 29, 64, 84, 128})
}

// paddedSameBits checks on every level that the product with n columns of
// B packed (ldb = n) has the bits of the same product with B padded to
// ldb = n+1, which the general narrow kernel computes, for each m and k
// and every epilogue; seed picks the random stream.
func paddedSameBits(t *testing.T, seed uint64, n int, ms, ks []int) {
	t.Helper()
	r := rng.New(seed, "kernel/test", 0)
	zeroed := func(s []float32) []float32 { return withZeros(r, s) }
	for _, path := range Levels() {
		for _, m := range ms {
			for _, k := range ks {
				for mode := 0; mode < 8; mode++ {
					acc, relu, withBias := mode&1 != 0, mode&2 != 0, mode&4 != 0
					if acc && withBias {
						continue
					}
					a, b := zeroed(randSlice(r, m*k)), zeroed(randSlice(r, k*n))
					padded := make([]float32, k*(n+1))
					for p := range k {
						copy(padded[(n+1)*p:(n+1)*p+n], b[n*p:n*p+n])
					}
					var bias []float32
					if withBias {
						bias = zeroed(randSlice(r, n))
					}
					c := zeroed(randSlice(r, m*n))
					want := append([]float32(nil), c...)
					gemmOn(path, false, m, n, k, a, k, b, n, c, n, acc, bias, relu)
					gemmOn(path, false, m, n, k, a, k, padded, n+1, want, n, acc, bias, relu)
					for i := range c {
						if math.Float32bits(c[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%v m=%d k=%d mode=%d: C[%d] = %v, general narrow kernel %v", path, m, k, mode, i, c[i], want[i])
						}
					}
				}
			}
		}
	}
}

// TestNarrowTransposedSameBits: the transposed-A kernel for one and two
// columns (a narrow output layer's dW) gives exactly the bits of the
// general narrow kernel (the same product padded to three columns), for
// every k mod 4, every epilogue, m not a multiple of 16, and signed zeros.
func TestNarrowTransposedSameBits(t *testing.T) {
	r := rng.New(12, "kernel/test", 0)
	zeroed := func(s []float32) []float32 { return withZeros(r, s) }
	for _, path := range Levels() {
		for _, n := range []int{1, 2} {
			for _, m := range []int{1, 16, 19, 64, 84} {
				for _, k := range []int{1, 2, 3, 4, 5, 6, 7, 29, 128} {
					for mode := 0; mode < 8; mode++ {
						acc, relu, withBias := mode&1 != 0, mode&2 != 0, mode&4 != 0
						if acc && withBias {
							continue
						}
						a, b := zeroed(randSlice(r, k*m)), zeroed(randSlice(r, k*n))
						b3 := make([]float32, k*3)
						for p := range k {
							copy(b3[3*p:3*p+n], b[n*p:n*p+n])
						}
						var bias, bias3 []float32
						if withBias {
							bias = zeroed(randSlice(r, n))
							bias3 = append(append([]float32(nil), bias...), make([]float32, 3-n)...)
						}
						c := zeroed(randSlice(r, m*n))
						want := make([]float32, m*3)
						for i := range m {
							copy(want[3*i:3*i+n], c[n*i:n*i+n])
						}
						gemmOn(path, true, m, n, k, a, m, b, n, c, n, acc, bias, relu)
						gemmOn(path, true, m, 3, k, a, m, b3, 3, want, 3, acc, bias3, relu)
						for i := range m {
							for j := range n {
								if got, w := c[i*n+j], want[i*3+j]; math.Float32bits(got) != math.Float32bits(w) {
									t.Fatalf("%v n=%d m=%d k=%d mode=%d: C[%d][%d] = %v, general narrow kernel %v", path, n, m, k, mode, i, j, got, w)
								}
							}
						}
					}
				}
			}
		}
	}
}
