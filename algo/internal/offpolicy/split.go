package offpolicy

import (
	"context"
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

// Learn runs the updates Due hands out for env steps (prev, step] on l
// alone, phase by phase: each phase's gradient at l's parameters, then its
// apply. It is SAC's, TD3's and DDPG's Learn, so that one learner and
// several (the executors run the same phases, averaging each phase's
// gradients before its apply) compute one update written once. It returns
// the last Apply's scalars, and whether any update of the call took an
// actor phase (Learn reports the actor's loss then).
func Learn(ctx context.Context, l algo.SplitLearner, rb algo.Replay, tickets []algo.Ticket, g *algo.Grad,
	prev, step int64, next uint64) (stats []algo.Stat, ts []algo.Ticket, actor bool, err error) {
	tickets = l.Due(tickets[:0], rb, prev, step, next)
	for _, t := range tickets {
		n := algo.Phases(l, t)
		actor = actor || n > 1
		for ph := range n {
			t.Phase = ph
			if err := l.Grad(ctx, rb, t, g); err != nil {
				return nil, tickets, actor, err
			}
			if stats, err = l.Apply(g); err != nil {
				return nil, tickets, actor, err
			}
		}
	}
	return stats, tickets, actor, nil
}
