package nn

import (
	"slices"
	"testing"

	"herd/internal/rng"
)

// TestMLPInput: a Forward on the input written into Input's buffer gives
// the outputs and gradients of a Forward on a copy of it elsewhere.
func TestMLPInput(t *testing.T) {
	m, err := NewMLP(MLPConfig{In: 5, Hidden: []int{7}, Out: 3, Act: Tanh}, rng.New(1, "nn/input", 0))
	if err != nil {
		t.Fatal(err)
	}
	const batch = 6
	r := rng.New(2, "nn/input", 0)
	x := make([]float32, batch*m.In())
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	dOut := make([]float32, batch*m.Out())
	for i := range dOut {
		dOut[i] = float32(r.NormFloat64())
	}
	run := func(in []float32) ([]float32, [][]float32) {
		m.ZeroGrad()
		y := slices.Clone(m.Forward(in, batch))
		m.Backward(dOut)
		var g [][]float32
		for _, p := range m.Params() {
			g = append(g, slices.Clone(p.Grad))
		}
		return y, g
	}
	wantY, wantG := run(x)
	buf := m.Input(batch)
	if len(buf) != batch*m.In() {
		t.Fatalf("Input(%d) has %d values, want %d", batch, len(buf), batch*m.In())
	}
	copy(buf, x)
	gotY, gotG := run(buf)
	if !slices.Equal(gotY, wantY) {
		t.Fatalf("outputs %v, want %v", gotY, wantY)
	}
	for i := range wantG {
		if !slices.Equal(gotG[i], wantG[i]) {
			t.Fatalf("%s gradient differs", m.Params()[i].Name)
		}
	}
}
