package onpolicy

import (
	"fmt"

	"herd/algo"
	"herd/weights"
)

// The methods below cut a Learn call into a gradient step and an apply
// step, for plans whose workers compute gradients on their own rollouts
// while one learner applies them (A3C, flow.ComputeGradients and
// flow.ApplyGradients).

// NewGrad returns a gradient buffer with one part per parameter tensor, in
// Agent.Params order.
func (l *Learner) NewGrad() *algo.Grad {
	ps := l.Agent.Params()
	g := &algo.Grad{Parts: make([][]float32, len(ps)), Has: make([]int, len(ps)), Steps: make([]int, len(ps))}
	for i, p := range ps {
		g.Parts[i] = make([]float32, len(p.Value))
	}
	return g
}

// SetParams copies v's values into the agent (a worker's copy of the
// learner, before it computes gradients at v).
func (l *Learner) SetParams(v *weights.Version) error { return v.CopyTo(l.Agent.Params()) }

// GradTo copies the agent's accumulated gradients into g (N = 1).
func (l *Learner) GradTo(g *algo.Grad) error {
	ps := l.Agent.Params()
	if len(g.Parts) != len(ps) {
		return fmt.Errorf("%w: %d parts for %d parameters", algo.ErrGradShape, len(g.Parts), len(ps))
	}
	for i, p := range ps {
		if len(g.Parts[i]) != len(p.Grad) {
			return fmt.Errorf("%w: part %d has %d values, want %d", algo.ErrGradShape, i, len(g.Parts[i]), len(p.Grad))
		}
		copy(g.Parts[i], p.Grad)
		g.Has[i], g.Steps[i] = 1, 1
	}
	g.N = 1
	return nil
}

// Apply counts one update (the version number, as Begin does) and takes
// one optimizer step with g's gradients; it returns the update's number,
// 1 for the first.
func (l *Learner) Apply(g *algo.Grad) (int, error) {
	ps := l.Agent.Params()
	if len(g.Parts) != len(ps) {
		return 0, fmt.Errorf("%w: %d parts for %d parameters", algo.ErrGradShape, len(g.Parts), len(ps))
	}
	for i, p := range ps {
		if len(g.Parts[i]) != len(p.Value) {
			return 0, fmt.Errorf("%w: part %d has %d values, want %d", algo.ErrGradShape, i, len(g.Parts[i]), len(p.Value))
		}
		copy(p.Grad, g.Parts[i])
	}
	l.Opt.Step(ps)
	l.n++
	return int(l.n), nil
}

// PolicyGradient is the actor-critic policy loss L_pg − c_ent·mean(H) over
// B rows (A2C's and IMPALA's): it writes dL/dlog π = −A/B and
// dL/dH = −c_ent/B and returns L_pg = −mean(A·log π) and mean(H).
func PolicyGradient(dLogProb, dEntropy, adv, logProb, entropy []float32, entCoef float32) (pgLoss, entMean float64) {
	B := len(logProb)
	invB := 1 / float32(B)
	for r := range B {
		pgLoss += float64(-adv[r] * logProb[r])
		dLogProb[r] = -adv[r] * invB
		entMean += float64(entropy[r])
		dEntropy[r] = -entCoef * invB
	}
	return pgLoss / float64(B), entMean / float64(B)
}
