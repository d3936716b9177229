package nn

import (
	"errors"
	"math"
	"slices"
	"testing"

	"herd/internal/rng"
)

type torchRecurrentCase struct {
	Kind   string  `json:"kind"`
	T      int     `json:"T"`
	B      int     `json:"B"`
	In     int     `json:"in"`
	Hidden int     `json:"hidden"`
	Starts [][]int `json:"starts"`
	Params []struct {
		Name  string `json:"name"`
		Shape []int  `json:"shape"`
		Grad  string `json:"grad"`
	} `json:"params"`
	HS     string `json:"hs"`
	DX     string `json:"dx"`
	DH0    string `json:"dh0"`
	CFinal string `json:"c_final"`
	DC0    string `json:"dc0"`
}

func readRecurrentCases(t *testing.T) map[string]torchRecurrentCase {
	t.Helper()
	var table struct {
		Cases []torchRecurrentCase `json:"cases"`
	}
	readGzipJSON(t, "testdata/recurrent_torch.json.gz", &table)
	out := map[string]torchRecurrentCase{}
	for _, c := range table.Cases {
		out[c.Kind] = c
	}
	return out
}

// setRecurrent fills ps in order from g, as the generator fills
// named_parameters, after checking PyTorch's names and shapes.
func setRecurrent(t *testing.T, ps []*Param, tc torchRecurrentCase, g *lcg) {
	t.Helper()
	if len(ps) != len(tc.Params) {
		t.Fatalf("%d params, PyTorch has %d", len(ps), len(tc.Params))
	}
	for i, p := range ps {
		if p.Name != tc.Params[i].Name || !slices.Equal(p.Shape, tc.Params[i].Shape) {
			t.Fatalf("param %d: %s %v, PyTorch %s %v", i, p.Name, p.Shape, tc.Params[i].Name, tc.Params[i].Shape)
		}
		g.fill(p.Value, 0.5)
	}
}

func flatStarts(s [][]int) []bool {
	var out []bool
	for _, row := range s {
		for _, v := range row {
			out = append(out, v != 0)
		}
	}
	return out
}

// TestLSTMMatchesPyTorch steps PyTorch's nn.LSTM over 5 steps of 3
// sequences with episode resets, and compares every output, the final cell
// state and every gradient (parameters, x, h0, c0).
func TestLSTMMatchesPyTorch(t *testing.T) {
	tc := readRecurrentCases(t)["lstm"]
	l, err := NewLSTM("", tc.In, tc.Hidden, nil, rng.New(1, "lstm", 0))
	if err != nil {
		t.Fatal(err)
	}
	g := &lcg{x: 12345}
	setRecurrent(t, l.Params(), tc, g)
	x := make([]float32, tc.T*tc.B*tc.In)
	g.fill(x, 1)
	h0 := make([]float32, tc.B*tc.Hidden)
	g.fill(h0, 0.5)
	c0 := make([]float32, tc.B*tc.Hidden)
	g.fill(c0, 0.5)
	hs := l.Forward(x, tc.T, tc.B, h0, c0, flatStarts(tc.Starts))
	if e := relErr32(hs, decodeF32(t, tc.HS)); e > 1e-5 {
		t.Fatalf("outputs: relative error %.2e", e)
	}
	_, cT := l.FinalState()
	if e := relErr32(cT, decodeF32(t, tc.CFinal)); e > 1e-5 {
		t.Errorf("final cell state: relative error %.2e", e)
	}
	dh := make([]float32, len(hs))
	g.fill(dh, 1)
	dx := l.Backward(dh)
	if e := relErr32(dx, decodeF32(t, tc.DX)); e > 1e-5 {
		t.Errorf("dx: relative error %.2e", e)
	}
	dh0, dc0 := l.InitialGrad()
	if e := relErr32(dh0, decodeF32(t, tc.DH0)); e > 1e-5 {
		t.Errorf("dh0: relative error %.2e", e)
	}
	if e := relErr32(dc0, decodeF32(t, tc.DC0)); e > 1e-5 {
		t.Errorf("dc0: relative error %.2e", e)
	}
	for i, p := range l.Params() {
		if e := relErr32(p.Grad, decodeF32(t, tc.Params[i].Grad)); e > 1e-5 {
			t.Errorf("%s grad: relative error %.2e", p.Name, e)
		}
	}
}

// TestGRUMatchesPyTorch is TestLSTMMatchesPyTorch for nn.GRU.
func TestGRUMatchesPyTorch(t *testing.T) {
	tc := readRecurrentCases(t)["gru"]
	l, err := NewGRU("", tc.In, tc.Hidden, nil, rng.New(1, "gru", 0))
	if err != nil {
		t.Fatal(err)
	}
	g := &lcg{x: 12345}
	setRecurrent(t, l.Params(), tc, g)
	x := make([]float32, tc.T*tc.B*tc.In)
	g.fill(x, 1)
	h0 := make([]float32, tc.B*tc.Hidden)
	g.fill(h0, 0.5)
	hs := l.Forward(x, tc.T, tc.B, h0, flatStarts(tc.Starts))
	if e := relErr32(hs, decodeF32(t, tc.HS)); e > 1e-5 {
		t.Fatalf("outputs: relative error %.2e", e)
	}
	dh := make([]float32, len(hs))
	g.fill(dh, 1)
	dx := l.Backward(dh)
	if e := relErr32(dx, decodeF32(t, tc.DX)); e > 1e-5 {
		t.Errorf("dx: relative error %.2e", e)
	}
	if e := relErr32(l.InitialGrad(), decodeF32(t, tc.DH0)); e > 1e-5 {
		t.Errorf("dh0: relative error %.2e", e)
	}
	for i, p := range l.Params() {
		if e := relErr32(p.Grad, decodeF32(t, tc.Params[i].Grad)); e > 1e-5 {
			t.Errorf("%s grad: relative error %.2e", p.Name, e)
		}
	}
}

// TestRecurrentResetCutsGradient: the output after a reset does not depend
// on anything before it, so its gradient reaches neither h0 nor earlier
// inputs.
func TestRecurrentResetCutsGradient(t *testing.T) {
	const T, B, in, h = 4, 1, 3, 5
	l, err := NewLSTM("", in, h, nil, rng.New(1, "lstm", 0))
	if err != nil {
		t.Fatal(err)
	}
	x := make([]float32, T*B*in)
	UniformInit(x, 1, rng.New(2, "x", 0))
	h0 := make([]float32, B*h)
	UniformInit(h0, 1, rng.New(3, "h0", 0))
	starts := []bool{false, false, true, false}
	l.Forward(x, T, B, h0, make([]float32, B*h), starts)
	dh := make([]float32, T*B*h)
	for i := 2 * h; i < len(dh); i++ { // loss on steps 2 and 3 only
		dh[i] = 1
	}
	dx := l.Backward(dh)
	for i, v := range dx[:2*in] {
		if v != 0 {
			t.Errorf("dx[%d] = %v before the reset, want 0", i, v)
		}
	}
	dh0, _ := l.InitialGrad()
	for i, v := range dh0 {
		if v != 0 {
			t.Errorf("dh0[%d] = %v, want 0", i, v)
		}
	}
}

func TestRecurrentNoAllocs(t *testing.T) {
	const T, B, in, h = 8, 4, 6, 16
	l, err := NewLSTM("", in, h, nil, rng.New(1, "lstm", 0))
	if err != nil {
		t.Fatal(err)
	}
	gru, err := NewGRU("", in, h, nil, rng.New(1, "gru", 0))
	if err != nil {
		t.Fatal(err)
	}
	x := make([]float32, T*B*in)
	st := make([]float32, B*h)
	dh := make([]float32, T*B*h)
	run := func() {
		l.Forward(x, T, B, st, st, nil)
		l.Backward(dh)
		gru.Forward(x, T, B, st, nil)
		gru.Backward(dh)
	}
	run()
	if a := testing.AllocsPerRun(5, run); a != 0 {
		t.Errorf("%v allocations per LSTM+GRU Forward+Backward, want 0", a)
	}
}

func TestRecurrentConfigErrors(t *testing.T) {
	if _, err := NewLSTM("", 0, 4, nil, rng.New(1, "x", 0)); !errors.Is(err, ErrConfig) {
		t.Errorf("LSTM in 0: err = %v, want ErrConfig", err)
	}
	if _, err := NewGRU("", 4, -1, nil, rng.New(1, "x", 0)); !errors.Is(err, ErrConfig) {
		t.Errorf("GRU hidden −1: err = %v, want ErrConfig", err)
	}
	if _, err := NewLSTM("", 4, 4, nil, nil); !errors.Is(err, ErrConfig) {
		t.Errorf("LSTM without a rand: err = %v, want ErrConfig", err)
	}
}

// BenchmarkLSTM and BenchmarkGRU: forward + backward over a segment of
// T = 128 steps of B = 8 sequences, 128 hidden units, 64 inputs
// (nn/testdata/gen/torch_bench.py times PyTorch's nn.LSTM on the same).
func BenchmarkLSTM(b *testing.B) { benchRecurrent(b, 4) }

func BenchmarkGRU(b *testing.B) { benchRecurrent(b, 3) }

func benchRecurrent(b *testing.B, gates int) {
	const T, B, in, h = 128, 8, 64, 128
	x := make([]float32, T*B*in)
	UniformInit(x, 1, rng.New(2, "x", 0))
	st := make([]float32, B*h)
	dh := make([]float32, T*B*h)
	UniformInit(dh, 1, rng.New(3, "dh", 0))
	step := func() {}
	if gates == 4 {
		l, err := NewLSTM("", in, h, nil, rng.New(1, "lstm", 0))
		if err != nil {
			b.Fatal(err)
		}
		step = func() { l.Forward(x, T, B, st, st, nil); l.Backward(dh) }
	} else {
		l, err := NewGRU("", in, h, nil, rng.New(1, "gru", 0))
		if err != nil {
			b.Fatal(err)
		}
		step = func() { l.Forward(x, T, B, st, nil); l.Backward(dh) }
	}
	b.ResetTimer()
	for range b.N {
		step()
	}
}

// recurrent64 runs PyTorch's LSTM (gates 4) or GRU (gates 3) equations in
// float64 over T steps of B sequences with resets, from h0 (and c0), and
// returns Σ_t h_t·g_t: the reference of the finite-difference checks.
func recurrent64(gates, T, B, in, H int, wih, whh, bih, bhh, x, h0, c0, g []float64, starts []bool) float64 {
	sig := func(v float64) float64 { return 1 / (1 + math.Exp(-v)) }
	h := append([]float64(nil), h0...)
	c := append([]float64(nil), c0...)
	var loss float64
	pre := func(w, b []float64, v []float64, row, width int) float64 {
		s := b[row]
		for k := range width {
			s += w[row*width+k] * v[k]
		}
		return s
	}
	for t := range T {
		for b := range B {
			hb, cb := h[b*H:(b+1)*H], c[b*H:(b+1)*H]
			if starts[t*B+b] {
				clear(hb)
				clear(cb)
			}
			xb := x[(t*B+b)*in : (t*B+b+1)*in]
			nh, nc := make([]float64, H), make([]float64, H)
			for k := range H {
				if gates == 4 {
					i := sig(pre(wih, bih, xb, k, in) + pre(whh, bhh, hb, k, H))
					f := sig(pre(wih, bih, xb, H+k, in) + pre(whh, bhh, hb, H+k, H))
					gg := math.Tanh(pre(wih, bih, xb, 2*H+k, in) + pre(whh, bhh, hb, 2*H+k, H))
					o := sig(pre(wih, bih, xb, 3*H+k, in) + pre(whh, bhh, hb, 3*H+k, H))
					nc[k] = f*cb[k] + i*gg
					nh[k] = o * math.Tanh(nc[k])
				} else {
					r := sig(pre(wih, bih, xb, k, in) + pre(whh, bhh, hb, k, H))
					z := sig(pre(wih, bih, xb, H+k, in) + pre(whh, bhh, hb, H+k, H))
					n := math.Tanh(pre(wih, bih, xb, 2*H+k, in) + r*pre(whh, bhh, hb, 2*H+k, H))
					nh[k] = (1-z)*n + z*hb[k]
				}
			}
			copy(hb, nh)
			copy(cb, nc)
			for k := range H {
				loss += hb[k] * g[(t*B+b)*H+k]
			}
		}
	}
	return loss
}

// TestRecurrentGradients checks every gradient of LSTM and GRU against
// central differences of recurrent64.
func TestRecurrentGradients(t *testing.T) {
	const T, B, in, H = 4, 2, 3, 4
	starts := []bool{false, true, false, false, true, false, false, false}
	for _, gates := range []int{4, 3} {
		r := rng.New(5, "rec-grad", gates)
		x := make([]float32, T*B*in)
		UniformInit(x, 1, r)
		h0 := make([]float32, B*H)
		UniformInit(h0, 1, r)
		c0 := make([]float32, B*H)
		UniformInit(c0, 1, r)
		g := make([]float32, T*B*H)
		UniformInit(g, 1, r)
		var ps []*Param
		var dx, dh0 []float32
		if gates == 4 {
			l, err := NewLSTM("", in, H, nil, r)
			if err != nil {
				t.Fatal(err)
			}
			l.Forward(x, T, B, h0, c0, starts)
			dx = l.Backward(g)
			dh0, _ = l.InitialGrad()
			ps = l.Params()
		} else {
			l, err := NewGRU("", in, H, nil, r)
			if err != nil {
				t.Fatal(err)
			}
			l.Forward(x, T, B, h0, starts)
			dx = l.Backward(g)
			dh0 = l.InitialGrad()
			ps = l.Params()
		}
		w := [4][]float64{to64(ps[0].Value), to64(ps[1].Value), to64(ps[2].Value), to64(ps[3].Value)}
		x64, h64, c64, g64 := to64(x), to64(h0), to64(c0), to64(g)
		loss := func() float64 {
			return recurrent64(gates, T, B, in, H, w[0], w[1], w[2], w[3], x64, h64, c64, g64, starts)
		}
		for i, p := range ps {
			if e := relErr(p.Grad, numGrad(w[i], loss)); e > gradTol {
				t.Errorf("gates %d: %s relative error %.2e", gates, p.Name, e)
			}
		}
		if e := relErr(dx, numGrad(x64, loss)); e > gradTol {
			t.Errorf("gates %d: dx relative error %.2e", gates, e)
		}
		if e := relErr(dh0, numGrad(h64, loss)); e > gradTol {
			t.Errorf("gates %d: dh0 relative error %.2e", gates, e)
		}
	}
}

// TestGateActivations: the float32 gate activations against float64
// math over [−90, 90] (every 1/4096, and the whole range of tiny values
// near 0): e^x and σ(x) within 3e-7 relative, tanh within 3e-7 relative.
func TestGateActivations(t *testing.T) {
	worst := [3]float64{}
	check := func(x float32) {
		xf := float64(x)
		e := math.Exp(xf)
		if e < math.MaxFloat32 && e > 0x1p-126 && xf > -87 && xf <= 88 {
			worst[0] = max(worst[0], math.Abs(float64(exp32(x))-e)/e)
		}
		s := 1 / (1 + math.Exp(-xf))
		if s > 0x1p-100 {
			worst[1] = max(worst[1], math.Abs(float64(sigmoid32(x))-s)/s)
		}
		if th := math.Tanh(xf); th != 0 {
			worst[2] = max(worst[2], math.Abs(float64(gateTanh(x))-th)/math.Abs(th))
		}
	}
	for i := -90 * 4096; i <= 90*4096; i++ {
		check(float32(i) / 4096)
	}
	for x := float32(1e-30); x < 1; x *= 1.01 {
		check(x)
		check(-x)
	}
	t.Logf("worst relative errors: exp %.2e, sigmoid %.2e, tanh %.2e", worst[0], worst[1], worst[2])
	for i, name := range []string{"exp", "sigmoid", "tanh"} {
		if worst[i] > 3e-7 {
			t.Errorf("%s: relative error up to %.2e", name, worst[i])
		}
	}
	if sigmoid32(-200) != 0 || sigmoid32(200) != 1 || gateTanh(200) != 1 || gateTanh(-200) != -1 {
		t.Errorf("limits: σ(−200) %v σ(200) %v tanh(±200) %v %v", sigmoid32(-200), sigmoid32(200), gateTanh(200), gateTanh(-200))
	}
}
