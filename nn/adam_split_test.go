package nn

import (
	"math"
	"testing"

	"herd/internal/rng"
)

// TestAdamStepSplitSameBits: StepSplit gives Step's bits on parameter
// lists whose halfway point falls inside a parameter at an offset that is
// not a multiple of 16, with and without weight decay.
func TestAdamStepSplitSameBits(t *testing.T) {
	for _, sizes := range [][]int{{480, 120, 10080, 84, 168, 2}, {4100, 33, 5001}, {8199}, {100}} {
		for _, wd := range []float32{0, 0.01} {
			r := rng.New(11, "nn/test", len(sizes))
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
			a1, _ := NewAdam(AdamConfig{LR: 1e-3, WeightDecay: wd})
			a2, _ := NewAdam(AdamConfig{LR: 1e-3, WeightDecay: wd})
			sp := &goSplitter{}
			for range 3 {
				for i := range whole {
					for j := range whole[i].Grad {
						g := float32(r.NormFloat64())
						whole[i].Grad[j], split[i].Grad[j] = g, g
					}
				}
				a1.Step(whole)
				a2.StepSplit(split, sp)
			}
			for i := range whole {
				for j := range whole[i].Value {
					if math.Float32bits(whole[i].Value[j]) != math.Float32bits(split[i].Value[j]) {
						t.Fatalf("sizes %v wd %v: param %d element %d: Step %v, StepSplit %v", sizes, wd, i, j, whole[i].Value[j], split[i].Value[j])
					}
				}
			}
		}
	}
}
