package onpolicy

import (
	"math"
	"testing"

	"herd/internal/rng"
	"herd/nn"
)

// TestNetMatchesMLP: the layer-by-layer net with the fast tanh computes what
// nn's MLP computes (outputs and every gradient), to float32 rounding.
func TestNetMatchesMLP(t *testing.T) {
	for _, act := range []nn.Activation{nn.Tanh, nn.ReLU, nn.Sigmoid} {
		r := rng.New(1, "test/net", 0)
		n, err := newNet(5, []int{16, 8}, 3, act, true, 0.01, nil, r)
		if err != nil {
			t.Fatal(err)
		}
		m, err := nn.NewMLP(nn.MLPConfig{In: 5, Hidden: []int{16, 8}, Out: 3, Act: act}, r)
		if err != nil {
			t.Fatal(err)
		}
		// Same weights: names match ("0.weight", "2.bias", …).
		byName := map[string]*nn.Param{}
		for _, p := range n.Params() {
			byName[p.Name] = p
		}
		for _, p := range m.Params() {
			q := byName[p.Name]
			if q == nil || len(q.Value) != len(p.Value) || q.Transposed != p.Transposed {
				t.Fatalf("param %s has no twin in the net", p.Name)
			}
			copy(p.Value, q.Value)
		}
		const B = 7
		x := make([]float32, B*5)
		dOut := make([]float32, B*3)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		for i := range dOut {
			dOut[i] = float32(r.NormFloat64())
		}
		got := append([]float32(nil), n.Forward(x, B)...)
		want := m.Forward(x, B)
		closeTo(t, act.String()+" output", got, want)
		nn.ZeroGrads(n.Params())
		m.ZeroGrad()
		n.Backward(dOut)
		m.Backward(dOut)
		for _, p := range m.Params() {
			closeTo(t, act.String()+" grad "+p.Name, byName[p.Name].Grad, p.Grad)
		}
	}
}

func closeTo(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range want {
		if math.Abs(float64(got[i]-want[i])) > 1e-5*(1+math.Abs(float64(want[i]))) {
			t.Fatalf("%s[%d] = %v, want %v", what, i, got[i], want[i])
		}
	}
}

func BenchmarkNetForwardBackward(b *testing.B) {
	r := rng.New(1, "bench/net", 0)
	n, err := newNet(4, []int{64, 64}, 2, nn.Tanh, true, 0.01, nil, r)
	if err != nil {
		b.Fatal(err)
	}
	const B = 128
	x := make([]float32, B*4)
	d := make([]float32, B*2)
	n.Reserve(B)
	b.ReportAllocs()
	for b.Loop() {
		n.Forward(x, B)
		n.Backward(d)
	}
}

// layerNorm64 is an independent float64 LayerNorm (PyTorch's, ε = 1e-5).
func layerNorm64(x, w, b []float64, in int) []float64 {
	out := make([]float64, len(x))
	for r := 0; r < len(x)/in; r++ {
		row := x[r*in : (r+1)*in]
		var m, v float64
		for _, e := range row {
			m += e / float64(in)
		}
		for _, e := range row {
			v += (e - m) * (e - m) / float64(in)
		}
		for k, e := range row {
			out[r*in+k] = w[k]*(e-m)/math.Sqrt(v+1e-5) + b[k]
		}
	}
	return out
}

// TestInputNorm: a net with input normalization is its layers applied to
// the float64 LayerNorm of the input, and its scale and shift have the
// gradients of central differences (loss: Σ output · c).
func TestInputNorm(t *testing.T) {
	const in, B = 5, 6
	r := rng.New(2, "test/inputnorm", 0)
	n, err := newNet(in, []int{7}, 2, nn.Tanh, true, 1, nil, r)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := newNet(in, []int{7}, 2, nn.Tanh, true, 1, nil, rng.New(2, "test/inputnorm", 0))
	if err != nil {
		t.Fatal(err)
	}
	n.withInputNorm(in)
	if n.params[0].Name != "norm.weight" || n.params[1].Name != "norm.bias" || len(n.params) != len(plain.params)+2 {
		t.Fatalf("params %v", n.params)
	}
	x := make([]float32, B*in)
	for i := range x {
		x[i] = float32(3 * r.NormFloat64())
	}
	for k := range in {
		n.norm.w.Value[k] = float32(1 + 0.3*r.NormFloat64())
		n.norm.b.Value[k] = float32(0.2 * r.NormFloat64())
	}
	c := make([]float32, B*2)
	for i := range c {
		c[i] = float32(r.NormFloat64())
	}
	w64, b64 := toF64(n.norm.w.Value), toF64(n.norm.b.Value)
	f := func() float64 {
		y := layerNorm64(toF64(x), w64, b64, in)
		yy := make([]float32, len(y))
		for i, v := range y {
			yy[i] = float32(v)
		}
		out := plain.Forward(yy, B)
		s := 0.0
		for i, o := range out {
			s += float64(o) * float64(c[i])
		}
		return s
	}
	got := n.Forward(x, B)
	y := layerNorm64(toF64(x), w64, b64, in)
	yy := make([]float32, len(y))
	for i, v := range y {
		yy[i] = float32(v)
	}
	want := plain.Forward(yy, B)
	for i := range want {
		if math.Abs(float64(got[i]-want[i])) > 1e-4 {
			t.Fatalf("output %d: %v, want %v", i, got[i], want[i])
		}
	}
	nn.ZeroGrads(n.params)
	n.Forward(x, B)
	n.Backward(c)
	for _, pr := range []struct {
		name string
		p    []float64
		grad []float32
	}{{"dw", w64, n.norm.w.Grad}, {"db", b64, n.norm.b.Grad}} {
		for k := range pr.p {
			h := 1e-3
			pr.p[k] += h
			up := f()
			pr.p[k] -= 2 * h
			down := f()
			pr.p[k] += h
			if num := (up - down) / (2 * h); math.Abs(num-float64(pr.grad[k])) > 2e-3*(1+math.Abs(num)) {
				t.Fatalf("%s[%d] = %v, central difference %v", pr.name, k, pr.grad[k], num)
			}
		}
	}
}

func toF64(s []float32) []float64 {
	out := make([]float64, len(s))
	for i, v := range s {
		out[i] = float64(v)
	}
	return out
}
