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
