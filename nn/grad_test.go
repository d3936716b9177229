package nn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"herd/internal/rng"
)

// Finite-difference gradient checks. Each analytical gradient (computed in
// float32 by the package) is compared with central differences of an
// independent float64 reference implementation of the same function, at
// the same float32 parameter values, so the check measures the float32
// gradient's error and not finite-difference noise. The criterion is the
// relative error ‖g − ĝ‖ / max(‖g‖, ‖ĝ‖) ≤ 1e-3 per tensor.

const gradTol = 1e-3

func relErr(got []float32, want []float64) float64 {
	var d, ng, nw float64
	for i := range got {
		e := float64(got[i]) - want[i]
		d += e * e
		ng += float64(got[i]) * float64(got[i])
		nw += want[i] * want[i]
	}
	den := math.Sqrt(max(ng, nw))
	if den == 0 {
		return 0
	}
	return math.Sqrt(d) / den
}

// numGrad returns dL/dx by central differences of the float64 function f
// around x (x is restored).
func numGrad(x []float64, f func() float64) []float64 {
	g := make([]float64, len(x))
	for i := range x {
		h := 1e-6 * max(1, math.Abs(x[i]))
		old := x[i]
		x[i] = old + h
		fp := f()
		x[i] = old - h
		fm := f()
		x[i] = old
		g[i] = (fp - fm) / (2 * h)
	}
	return g
}

func to64(s []float32) []float64 {
	o := make([]float64, len(s))
	for i, v := range s {
		o[i] = float64(v)
	}
	return o
}

func randn(r *rand.Rand, n int, scale float64) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(scale * r.NormFloat64())
	}
	return s
}

func checkGrad(t *testing.T, what string, got []float32, want []float64) {
	t.Helper()
	if e := relErr(got, want); !(e <= gradTol) {
		t.Errorf("%s: relative error %.3g > %g", what, e, gradTol)
	}
}

// mlp64 is the float64 reference forward pass: ws[l] is [out][in]
// (PyTorch layout), bs[l] the bias.
func mlp64(x []float64, batch int, sizes []int, ws, bs [][]float64, acts []Activation) []float64 {
	cur := x
	for l := range ws {
		in, out := sizes[l], sizes[l+1]
		nxt := make([]float64, batch*out)
		for r := 0; r < batch; r++ {
			for o := 0; o < out; o++ {
				s := bs[l][o]
				for i := 0; i < in; i++ {
					s += ws[l][o*in+i] * cur[r*in+i]
				}
				switch acts[l] {
				case ReLU:
					s = math.Max(s, 0)
				case Tanh:
					s = math.Tanh(s)
				case Sigmoid:
					s = 1 / (1 + math.Exp(-s))
				}
				nxt[r*out+o] = s
			}
		}
		cur = nxt
	}
	return cur
}

// TestGradMLP checks dL/dθ and dL/dx of MLPs for L = Σ c ⊙ output, for
// every activation and every backend.
func TestGradMLP(t *testing.T) {
	for _, backend := range GemmBackends() {
		for _, act := range []Activation{ReLU, Tanh, Sigmoid, Identity} {
			t.Run(fmt.Sprintf("%s/%v", backend, act), func(t *testing.T) {
				g, err := GemmByName(backend)
				if err != nil {
					t.Fatal(err)
				}
				for _, batch := range []int{3, 9} { // both sides of smallBatch
					gradMLP(t, g, act, batch)
				}
			})
		}
	}
}

func gradMLP(t *testing.T, g Gemm, act Activation, batch int) {
	t.Helper()
	r := rng.New(7, "nn/gradtest", int(act))
	sizes := []int{3, 17, 9, 4}
	m, err := NewMLP(MLPConfig{In: 3, Hidden: []int{17, 9}, Out: 4, Act: act, OutAct: Tanh, Gemm: g}, r)
	if err != nil {
		t.Fatal(err)
	}
	x := randn(r, batch*3, 1)
	c := randn(r, batch*4, 1)
	m.Forward(x, batch)
	m.ZeroGrad()
	dx := m.Backward(c)

	acts := []Activation{act, act, Tanh}
	ws := make([][]float64, 3)
	bs := make([][]float64, 3)
	for l := range ws {
		w := m.params[2*l]
		tmp := make([]float32, len(w.Value))
		transposeTo(tmp, w.Value, sizes[l], sizes[l+1]) // → [out][in]
		ws[l] = to64(tmp)
		bs[l] = to64(m.params[2*l+1].Value)
	}
	x64 := to64(x)
	loss := func() float64 {
		out := mlp64(x64, batch, sizes, ws, bs, acts)
		var s float64
		for i, v := range out {
			s += float64(c[i]) * v
		}
		return s
	}
	for l := range ws {
		gw := make([]float32, len(ws[l]))
		transposeTo(gw, m.params[2*l].Grad, sizes[l], sizes[l+1])
		checkGrad(t, fmt.Sprintf("layer %d weight", l), gw, numGrad(ws[l], loss))
		checkGrad(t, fmt.Sprintf("layer %d bias", l), m.params[2*l+1].Grad, numGrad(bs[l], loss))
	}
	checkGrad(t, "input", dx, numGrad(x64, loss))
}

// TestGradAccumulates checks that Backward adds to Grad (two backward
// passes give twice the gradient) until ZeroGrad.
func TestGradAccumulates(t *testing.T) {
	r := rng.New(1, "nn/acc", 0)
	m, _ := NewMLP(MLPConfig{In: 2, Hidden: []int{8}, Out: 3}, r)
	x, d := randn(r, 8, 1), randn(r, 12, 1)
	m.Forward(x, 4)
	m.Backward(d)
	once := append([]float32(nil), m.params[0].Grad...)
	m.Backward(d)
	for i, v := range m.params[0].Grad {
		if math.Abs(float64(v-2*once[i])) > 1e-5*(1+math.Abs(float64(v))) {
			t.Fatalf("grad[%d]=%v after two passes, want %v", i, v, 2*once[i])
		}
	}
	m.ZeroGrad()
	for _, p := range m.Params() {
		for _, v := range p.Grad {
			if v != 0 {
				t.Fatal("ZeroGrad left a nonzero gradient")
			}
		}
	}
}

func logsumexp64(z []float64) float64 {
	mx := math.Inf(-1)
	for _, v := range z {
		mx = math.Max(mx, v)
	}
	var s float64
	for _, v := range z {
		s += math.Exp(v - mx)
	}
	return mx + math.Log(s)
}

func TestGradCategorical(t *testing.T) {
	r := rng.New(2, "nn/gradtest", 0)
	const b, n = 6, 5
	head := Categorical{N: n}
	logits := randn(r, b*n, 2)
	actions := make([]int, b)
	for i := range actions {
		actions[i] = r.IntN(n)
	}
	gl, ge := randn(r, b, 1), randn(r, b, 1)
	z := to64(logits)
	loss := func() float64 {
		var s float64
		for row := 0; row < b; row++ {
			zr := z[row*n : (row+1)*n]
			ls := logsumexp64(zr)
			var h float64
			for _, v := range zr {
				h -= math.Exp(v-ls) * (v - ls)
			}
			s += float64(gl[row])*(zr[actions[row]]-ls) + float64(ge[row])*h
		}
		return s
	}
	d := head.Backward(make([]float32, b*n), logits, actions, gl, ge)
	checkGrad(t, "categorical logits", d, numGrad(z, loss))

	// forward values against the reference too
	lp := head.LogProbTo(make([]float32, b), logits, actions)
	ent := head.EntropyTo(make([]float32, b), logits)
	for row := 0; row < b; row++ {
		zr := z[row*n : (row+1)*n]
		ls := logsumexp64(zr)
		if math.Abs(float64(lp[row])-(zr[actions[row]]-ls)) > 1e-5 {
			t.Errorf("logprob row %d = %v, want %v", row, lp[row], zr[actions[row]]-ls)
		}
		var h float64
		for _, v := range zr {
			h -= math.Exp(v-ls) * (v - ls)
		}
		if math.Abs(float64(ent[row])-h) > 1e-5 {
			t.Errorf("entropy row %d = %v, want %v", row, ent[row], h)
		}
	}
}

func TestGradDiagGaussian(t *testing.T) {
	for _, stateDep := range []bool{false, true} {
		t.Run(fmt.Sprintf("stateDependent=%v", stateDep), func(t *testing.T) {
			r := rng.New(3, "nn/gradtest", 0)
			const b, dim = 5, 3
			g, _ := NewDiagGaussian(dim, stateDep, -0.3)
			out := randn(r, b*g.OutDim(), 0.7)
			if g.LogStd != nil {
				copy(g.LogStd.Value, randn(r, dim, 0.5))
			}
			actions := randn(r, b*dim, 1)
			gl, ge := randn(r, b, 1), randn(r, b, 1)
			o := to64(out)
			var ls64 []float64
			if g.LogStd != nil {
				ls64 = to64(g.LogStd.Value)
			}
			w := g.OutDim()
			loss := func() float64 {
				var s float64
				for row := 0; row < b; row++ {
					for i := 0; i < dim; i++ {
						mu := o[row*w+i]
						var ls float64
						if stateDep {
							ls = o[row*w+dim+i]
						} else {
							ls = ls64[i]
						}
						z := (float64(actions[row*dim+i]) - mu) / math.Exp(ls)
						s += float64(gl[row])*(-0.5*z*z-ls-0.5*math.Log(2*math.Pi)) + float64(ge[row])*(0.5+0.5*math.Log(2*math.Pi)+ls)
					}
				}
				return s
			}
			d := g.Backward(make([]float32, len(out)), out, actions, gl, ge)
			checkGrad(t, "gaussian out", d, numGrad(o, loss))
			if g.LogStd != nil {
				checkGrad(t, "gaussian logstd", g.LogStd.Grad, numGrad(ls64, loss))
			}

			// reparameterised sample: L = Σ c·a(out, ε)
			noise := make([]float32, b*dim)
			act := g.SampleTo(make([]float32, b*dim), noise, out, rng.New(1, "s", 0))
			_ = act
			c := randn(r, b*dim, 1)
			if g.LogStd != nil {
				g.LogStd.ZeroGrad()
			}
			lossS := func() float64 {
				var s float64
				for row := 0; row < b; row++ {
					for i := 0; i < dim; i++ {
						ls := 0.0
						if stateDep {
							ls = o[row*w+dim+i]
						} else {
							ls = ls64[i]
						}
						s += float64(c[row*dim+i]) * (o[row*w+i] + math.Exp(ls)*float64(noise[row*dim+i]))
					}
				}
				return s
			}
			d = g.BackwardSample(make([]float32, len(out)), out, noise, c)
			checkGrad(t, "gaussian sample out", d, numGrad(o, lossS))
			if g.LogStd != nil {
				checkGrad(t, "gaussian sample logstd", g.LogStd.Grad, numGrad(ls64, lossS))
			}
		})
	}
}

func TestGradTanhGaussian(t *testing.T) {
	r := rng.New(4, "nn/gradtest", 0)
	const b = 6
	h, err := NewTanhGaussian([]float32{-2, 0}, []float32{2, 1})
	if err != nil {
		t.Fatal(err)
	}
	dim := h.Dim
	out := randn(r, b*2*dim, 0.8)
	noise := make([]float32, b*dim)
	act := make([]float32, b*dim)
	lp := make([]float32, b)
	h.SampleTo(act, lp, noise, out, rng.New(2, "s", 0))
	c, gl := randn(r, b*dim, 1), randn(r, b, 1)
	o := to64(out)
	eval := func() (acts []float64, logps []float64) {
		for row := 0; row < b; row++ {
			var l float64
			for i := 0; i < dim; i++ {
				mu, raw := o[row*2*dim+i], o[row*2*dim+dim+i]
				ls := -5 + 0.5*7*(math.Tanh(raw)+1)
				e := float64(noise[row*dim+i])
				u := mu + math.Exp(ls)*e
				s, bias := float64(h.Scale[i]), float64(h.Bias[i])
				acts = append(acts, math.Tanh(u)*s+bias)
				// log N(u; μ, σ) written out in u, μ, σ (not ε) so the
				// reference differentiates it the way autograd would.
				z := (u - mu) / math.Exp(ls)
				l += -0.5*z*z - ls - 0.5*math.Log(2*math.Pi) - math.Log(s*(1-math.Tanh(u)*math.Tanh(u))+1e-6)
			}
			logps = append(logps, l)
		}
		return
	}
	a64, l64 := eval()
	for i := range a64 {
		if math.Abs(a64[i]-float64(act[i])) > 1e-5 {
			t.Fatalf("action %d = %v, want %v", i, act[i], a64[i])
		}
	}
	for i := range l64 {
		if math.Abs(l64[i]-float64(lp[i])) > 1e-4 {
			t.Fatalf("logprob %d = %v, want %v", i, lp[i], l64[i])
		}
	}
	loss := func() float64 {
		a, l := eval()
		var s float64
		for i := range a {
			s += float64(c[i]) * a[i]
		}
		for i := range l {
			s += float64(gl[i]) * l[i]
		}
		return s
	}
	d := h.BackwardSample(make([]float32, len(out)), out, noise, c, gl)
	checkGrad(t, "tanh-gaussian out", d, numGrad(o, loss))
}

func TestGradTanhActor(t *testing.T) {
	r := rng.New(5, "nn/gradtest", 0)
	h, _ := NewTanhActor([]float32{-1, -3}, []float32{1, 1})
	out := randn(r, 8, 1)
	c := randn(r, 8, 1)
	o := to64(out)
	loss := func() float64 {
		var s float64
		for k, v := range o {
			i := k % 2
			s += float64(c[k]) * (math.Tanh(v)*float64(h.Scale[i]) + float64(h.Bias[i]))
		}
		return s
	}
	checkGrad(t, "tanh actor", h.Backward(make([]float32, 8), out, c), numGrad(o, loss))
}

func TestGradLosses(t *testing.T) {
	r := rng.New(6, "nn/gradtest", 0)
	const n = 20
	pred, target, w := randn(r, n, 2), randn(r, n, 2), make([]float32, n)
	for i := range w {
		w[i] = float32(r.Float64())
	}
	p := to64(pred)
	for _, tc := range []struct {
		name string
		f    func(d []float32) float32
		ref  func() float64
	}{
		{"mse", func(d []float32) float32 { return MSE(d, pred, target) }, func() float64 {
			var s float64
			for i := range p {
				s += (p[i] - float64(target[i])) * (p[i] - float64(target[i]))
			}
			return s / n
		}},
		{"weighted-mse", func(d []float32) float32 { return WeightedMSE(d, pred, target, w) }, func() float64 {
			var s float64
			for i := range p {
				s += float64(w[i]) * (p[i] - float64(target[i])) * (p[i] - float64(target[i]))
			}
			return s / n
		}},
		{"huber", func(d []float32) float32 { return Huber(d, pred, target, 1) }, func() float64 {
			var s float64
			for i := range p {
				a := math.Abs(p[i] - float64(target[i]))
				if a <= 1 {
					s += 0.5 * a * a
				} else {
					s += a - 0.5
				}
			}
			return s / n
		}},
		{"weighted-huber-0.5", func(d []float32) float32 { return WeightedHuber(d, pred, target, w, 0.5) }, func() float64 {
			var s float64
			for i := range p {
				a := math.Abs(p[i] - float64(target[i]))
				if a <= 0.5 {
					s += float64(w[i]) * 0.5 * a * a
				} else {
					s += float64(w[i]) * 0.5 * (a - 0.25)
				}
			}
			return s / n
		}},
	} {
		d := make([]float32, n)
		l := tc.f(d)
		if want := tc.ref(); math.Abs(float64(l)-want) > 1e-5*(1+want) {
			t.Errorf("%s: loss %v, want %v", tc.name, l, want)
		}
		checkGrad(t, tc.name, d, numGrad(p, tc.ref))
	}
}

// TestGradCritic checks dQ/daction through the concat helper.
func TestGradCritic(t *testing.T) {
	r := rng.New(8, "nn/gradtest", 0)
	const b, od, ad = 4, 3, 2
	c, err := NewCritic(od, ad, MLPConfig{Hidden: []int{16}, Act: Tanh}, r)
	if err != nil {
		t.Fatal(err)
	}
	obs, act, dq := randn(r, b*od, 1), randn(r, b*ad, 1), randn(r, b, 1)
	c.Forward(obs, act, b)
	dAct := append([]float32(nil), c.Backward(dq)...)
	a64 := to64(act)
	loss := func() float64 {
		a32 := make([]float32, len(a64))
		for i, v := range a64 {
			a32[i] = float32(v)
		}
		// reference through a float64 evaluation of the same weights
		x := make([]float64, b*(od+ad))
		for row := 0; row < b; row++ {
			for i := 0; i < od; i++ {
				x[row*(od+ad)+i] = float64(obs[row*od+i])
			}
			for i := 0; i < ad; i++ {
				x[row*(od+ad)+od+i] = a64[row*ad+i]
			}
		}
		sizes := []int{od + ad, 16, 1}
		ws, bs := make([][]float64, 2), make([][]float64, 2)
		for l := 0; l < 2; l++ {
			tmp := make([]float32, sizes[l]*sizes[l+1])
			transposeTo(tmp, c.Net.params[2*l].Value, sizes[l], sizes[l+1])
			ws[l], bs[l] = to64(tmp), to64(c.Net.params[2*l+1].Value)
		}
		q := mlp64(x, b, sizes, ws, bs, []Activation{Tanh, Identity})
		var s float64
		for i, v := range q {
			s += float64(dq[i]) * v
		}
		return s
	}
	checkGrad(t, "critic dAction", dAct, numGrad(a64, loss))
}

// goSplitter is a Splitter that runs each job on a fresh goroutine.
type goSplitter struct{ done chan struct{} }

func (s *goSplitter) Go(f func()) {
	s.done = make(chan struct{})
	go func() { f(); close(s.done) }()
}

func (s *goSplitter) Wait() {
	if s.done != nil {
		<-s.done
		s.done = nil
	}
}

// TestBackwardSplitMatchesBackward: BackwardSplit gives bit-identical
// parameter and input gradients to Backward, on every backend, at batches
// on both sides of smallBatch, with and without the input gradient.
func TestBackwardSplitMatchesBackward(t *testing.T) {
	for _, backend := range GemmBackends() {
		g, err := GemmByName(backend)
		if err != nil {
			t.Fatal(err)
		}
		for _, batch := range []int{1, 5, 128} {
			r := rng.New(3, "nn/splittest", batch)
			m, err := NewMLP(MLPConfig{In: 4, Hidden: []int{120, 84}, Out: 2, Act: ReLU, Gemm: g}, r)
			if err != nil {
				t.Fatal(err)
			}
			x, d := randn(r, batch*4, 1), randn(r, batch*2, 1)
			grads := func(f func() []float32) ([][]float32, []float32) {
				m.ZeroGrad()
				m.Forward(x, batch)
				dx := append([]float32(nil), f()...)
				var out [][]float32
				for _, p := range m.Params() {
					out = append(out, append([]float32(nil), p.Grad...))
				}
				return out, dx
			}
			want, wantDx := grads(func() []float32 { return m.Backward(d) })
			for _, input := range []bool{true, false} {
				got, gotDx := grads(func() []float32 { return m.BackwardSplit(d, &goSplitter{}, input) })
				for i := range want {
					if !slices.Equal(got[i], want[i]) {
						t.Fatalf("%s batch %d input=%v: param %d gradient differs", backend, batch, input, i)
					}
				}
				if input && !slices.Equal(gotDx, wantDx) || !input && gotDx != nil {
					t.Fatalf("%s batch %d input=%v: input gradient differs", backend, batch, input)
				}
			}
		}
	}
}

// TestWideLayerInputGradSameBits checks the wide-layer route of Backward
// (dXᵀ = W·dZᵀ, taken when the batch is small next to in·out) against the
// direct route, dX = dZ·Wᵀ through a transposed copy of W: the same
// products in the same order, so the same bits.
func TestWideLayerInputGradSameBits(t *testing.T) {
	r := rng.New(3, "nn/wide", 0)
	m, err := NewMLP(MLPConfig{In: 256, Out: 48}, r)
	if err != nil {
		t.Fatal(err)
	}
	if m.fused == nil {
		t.Skip("no fused kernels on this backend")
	}
	const batch = 16
	x := make([]float32, batch*256)
	dOut := make([]float32, batch*48)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	for i := range dOut {
		dOut[i] = float32(r.NormFloat64())
	}
	m.Forward(x, batch)
	got := append([]float32(nil), m.Backward(dOut)...)
	l := &m.layers[0]
	if !(l.in*l.out > batch*(l.in+l.out)) {
		t.Fatal("the test's shape does not take the wide-layer route")
	}
	wT := make([]float32, l.in*l.out)
	want := make([]float32, batch*l.in)
	transposeTo(wT, l.w.Value, l.in, l.out)
	m.fused.gemmFused(false, batch, l.in, l.out, dOut, l.out, wT, l.in, want, l.in, false, nil, false)
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("dX[%d] = %v, direct route %v", i, got[i], want[i])
		}
	}
}
