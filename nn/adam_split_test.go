package nn

import (
	"math"
	"testing"

	"herd/internal/rng"
)

// splitOptimizer is an optimizer with a Step and a StepSplit.
type splitOptimizer interface {
	Step(params []*Param)
	StepSplit(params []*Param, sp Splitter)
}

// TestStepSplitSameBits: Adam's and RMSProp's StepSplit give Step's bits
// on parameter lists whose halfway point falls inside a parameter at an
// offset that is not a multiple of 16 (Adam with and without weight
// decay, RMSProp plain and centered).
func TestStepSplitSameBits(t *testing.T) {
	opts := []struct {
		name string
		mk   func() (splitOptimizer, error)
	}{
		{"adam", func() (splitOptimizer, error) { return NewAdam(AdamConfig{LR: 1e-3}) }},
		{"adam-wd", func() (splitOptimizer, error) { return NewAdam(AdamConfig{LR: 1e-3, WeightDecay: 0.01}) }},
		{"rmsprop", func() (splitOptimizer, error) { return NewRMSProp(RMSPropConfig{LR: 1e-3, Alpha: 0.95, Eps: 0.01}) }},
		{"rmsprop-centered", func() (splitOptimizer, error) {
			return NewRMSProp(RMSPropConfig{LR: 1e-3, Alpha: 0.95, Eps: 0.01, Centered: true})
		}},
	}
	for _, sizes := range [][]int{{480, 120, 10080, 84, 168, 2}, {4100, 33, 5001}, {8199}, {100}} {
		for oi, o := range opts {
			r := rng.New(11, "nn/test", len(sizes)+100*oi)
			mk := func() []*Param {
				var ps []*Param
				for i, n := range sizes {
					p := NewParam("p"+string(rune('a'+i)), n)
					for j := range p.Value {
						p.Value[j] = float32(r.NormFloat64())
					}
					ps = append(ps, p)
				}
				return ps
			}
			whole := mk()
			split := CloneParams(whole)
			o1, err := o.mk()
			if err != nil {
				t.Fatal(err)
			}
			o2, _ := o.mk()
			sp := &goSplitter{}
			for range 3 {
				for i := range whole {
					for j := range whole[i].Grad {
						g := float32(r.NormFloat64())
						if j%7 == 3 {
							g = 0 // centered RMSProp leaves these weights alone
						}
						whole[i].Grad[j], split[i].Grad[j] = g, g
					}
				}
				o1.Step(whole)
				o2.StepSplit(split, sp)
			}
			for i := range whole {
				for j := range whole[i].Value {
					if math.Float32bits(whole[i].Value[j]) != math.Float32bits(split[i].Value[j]) {
						t.Fatalf("%s, sizes %v: param %d element %d: Step %v, StepSplit %v", o.name, sizes, i, j, whole[i].Value[j], split[i].Value[j])
					}
				}
			}
		}
	}
}
