package nn

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestOptimizerStateResumesBitForBit: an optimizer restored from a saved
// state (one parameter not yet stepped, an annealed learning rate) updates
// the restored parameters exactly as the optimizer it was saved from.
func TestOptimizerStateResumesBitForBit(t *testing.T) {
	mk := []struct {
		name string
		new  func() StatefulOptimizer
	}{
		{"Adam", func() StatefulOptimizer { o, _ := NewAdam(AdamConfig{LR: 1e-2}); return o }},
		{"AdamW", func() StatefulOptimizer {
			o, _ := NewAdam(AdamConfig{LR: 1e-2, WeightDecay: 0.1, Decoupled: true})
			return o
		}},
		{"SGD", func() StatefulOptimizer { o, _ := NewSGD(1e-2, 0.9, 0); return o }},
		{"RMSProp", func() StatefulOptimizer { o, _ := NewRMSProp(RMSPropConfig{LR: 1e-3}); return o }},
		{"RMSPropCentered", func() StatefulOptimizer {
			o, _ := NewRMSProp(RMSPropConfig{LR: 1e-3, Centered: true})
			return o
		}},
	}
	for _, m := range mk {
		t.Run(m.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(5, 6))
			params := []*Param{{Name: "a", Shape: []int{7}, Value: make([]float32, 7), Grad: make([]float32, 7)},
				{Name: "b", Shape: []int{3}, Value: make([]float32, 3), Grad: make([]float32, 3)}}
			for _, p := range params {
				for i := range p.Value {
					p.Value[i] = float32(r.NormFloat64())
				}
			}
			step := func(o Optimizer, ps []*Param, r *rand.Rand) {
				for _, p := range ps {
					for i := range p.Grad {
						p.Grad[i] = float32(r.NormFloat64())
					}
				}
				o.Step(ps)
			}
			a := m.new()
			for range 3 {
				step(a, params[:1], r)
			}
			a.SetLR(a.LR() / 2)
			snap, err := a.MarshalState(params)
			if err != nil {
				t.Fatal(err)
			}
			clone := []*Param{{Value: slices.Clone(params[0].Value), Grad: make([]float32, 7)},
				{Value: slices.Clone(params[1].Value), Grad: make([]float32, 3)}}
			for range 4 {
				step(a, params, rand.New(rand.NewPCG(9, 9)))
			}
			b := m.new()
			if err := b.UnmarshalState(clone, snap); err != nil {
				t.Fatal(err)
			}
			if b.LR() != a.LR() {
				t.Fatalf("LR %v, want %v", b.LR(), a.LR())
			}
			for range 4 {
				step(b, clone, rand.New(rand.NewPCG(9, 9)))
			}
			for j := range params {
				for i := range params[j].Value {
					if math.Float32bits(clone[j].Value[i]) != math.Float32bits(params[j].Value[i]) {
						t.Fatalf("param %d[%d]: %v, want %v", j, i, clone[j].Value[i], params[j].Value[i])
					}
				}
			}
			if err := m.new().UnmarshalState(clone, snap[:len(snap)-1]); err == nil {
				t.Error("a truncated state was accepted")
			}
			if err := m.new().UnmarshalState(clone[:1], snap); err == nil {
				t.Error("a state for other parameters was accepted")
			}
		})
	}
}
