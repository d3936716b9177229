package offpolicy

import (
	"fmt"

	"herd/algo"
	"herd/nn"
)

// NewGrad returns a gradient buffer with one flat part per parameter
// group, each as long as the group's values, and nStats scalars.
func NewGrad(nStats int, groups ...[]*nn.Param) *algo.Grad {
	g := &algo.Grad{N: 1, Parts: make([][]float32, len(groups)), Has: make([]int, len(groups)),
		Steps: make([]int, len(groups)), Stats: make([]algo.Stat, nStats)}
	for i, ps := range groups {
		n := 0
		for _, p := range ps {
			n += len(p.Value)
		}
		g.Parts[i] = make([]float32, n)
	}
	return g
}

// GradOut copies the gradients of ps into dst (laid out as NewGrad did).
func GradOut(dst []float32, ps []*nn.Param) {
	o := 0
	for _, p := range ps {
		o += copy(dst[o:], p.Grad)
	}
}

// GradIn sets the gradients of ps from src (laid out as NewGrad did).
func GradIn(ps []*nn.Param, src []float32) error {
	o := 0
	for _, p := range ps {
		if o+len(p.Grad) > len(src) {
			return fmt.Errorf("%w: %d gradient values for more parameters", algo.ErrGradShape, len(src))
		}
		o += copy(p.Grad, src[o:o+len(p.Grad)])
	}
	if o != len(src) {
		return fmt.Errorf("%w: %d gradient values for %d parameters", algo.ErrGradShape, len(src), o)
	}
	return nil
}

// CheckGrad reports a gradient that was not sized by NewGrad for groups.
func CheckGrad(g *algo.Grad, groups int) error {
	if g == nil || len(g.Parts) != groups || len(g.Has) != groups || len(g.Steps) != groups {
		return fmt.Errorf("%w: not from this learner's NewGrad", algo.ErrGradShape)
	}
	return nil
}

// StartGrad resets g for a new update t: one gradient, no part yet.
func StartGrad(g *algo.Grad, t algo.Ticket) {
	g.Ticket, g.N, g.Targets = t, 1, 0
	clear(g.Has)
	clear(g.Steps)
}

// Concat returns the parameter groups as one list (a learner's State).
func Concat(groups ...[]*nn.Param) []*nn.Param {
	var all []*nn.Param
	for _, g := range groups {
		all = append(all, g...)
	}
	return all
}

// StepTickets appends one ticket per env step in (max(prev, starts),
// step], numbered from next: the schedule of SAC, TD3 and DDPG (one update
// per env step after learning_starts).
func StepTickets(dst []algo.Ticket, prev, step, starts int64, next uint64) []algo.Ticket {
	for s := max(prev, starts) + 1; s <= step; s++ {
		dst = append(dst, algo.Ticket{Step: s, Index: next})
		next++
	}
	return dst
}
