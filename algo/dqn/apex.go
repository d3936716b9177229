package dqn

import (
	"fmt"

	"herd/algo/internal/offpolicy"
	"herd/nn"
	"herd/sample"
)

// apexPolicy is the Q-network policy of an env worker that scores its own
// transitions (actor_priorities: true), as Ape-X's actors do: with its one
// local copy θ' of the network it computes
//
//	δ = R + γ^m · (1 − done) · max_a Q(s', a; θ') − Q(s, a; θ')
//
// on the n-step transitions the assembler produced (R and γ^m are already
// the n-step sum and discount). The learner's target network is not on the
// worker, so the bootstrap uses θ' too, as Ape-X's actors do; the learner
// replaces these priorities with its own TD errors on the first sample.
type apexPolicy struct {
	*offpolicy.MLPPolicy
	q, qNext []float32
	next     []int
}

// Prioritize implements algo.Prioritizer.
func (p *apexPolicy) Prioritize(tr *sample.Transitions) error {
	n, k := tr.N, p.OutDim()
	if tr.ActDim != 1 || len(tr.Actions) != n || len(tr.Rewards) != n || len(tr.Discounts) != n || len(tr.Dones) != n {
		return fmt.Errorf("%w: dqn: priorities for %d transitions with action dim %d", sample.ErrShape, n, tr.ActDim)
	}
	tr.Priorities = grow(tr.Priorities, n)
	if n == 0 {
		return nil
	}
	p.q = p.ForwardTo(grow(p.q, n*k), tr.Obs, n)
	p.qNext = p.ForwardTo(grow(p.qNext, n*k), tr.NextObs, n)
	p.next = grow(p.next, n)
	nn.ArgmaxTo(p.next, p.qNext, k)
	for i := range n {
		a := int(tr.Actions[i])
		if a < 0 || a >= k {
			return fmt.Errorf("%w: dqn: action %d of %d", sample.ErrShape, a, k)
		}
		target := tr.Rewards[i] + tr.Discounts[i]*(1-tr.Dones[i])*p.qNext[i*k+p.next[i]]
		d := target - p.q[i*k+a]
		if d < 0 {
			d = -d
		}
		tr.Priorities[i] = d
	}
	return nil
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}
