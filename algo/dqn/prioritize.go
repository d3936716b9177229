package dqn

import (
	"fmt"
	"math"

	"herd/algo"
	"herd/internal/scratch"
	"herd/sample"
)

// Values of Config.InitialPriorities.
const (
	// PrioritiesMax: new transitions enter prioritized replay at the
	// running maximum priority (Schaul et al. 2016; the default).
	PrioritiesMax = "max"
	// PrioritiesActor: env workers compute each transition's priority
	// |δ| + priority_eps with their local Q-network copy (Ape-X, Horgan et
	// al. 2018).
	PrioritiesActor = "actor"
)

// prioritizer computes Ape-X initial priorities (algo.Prioritizer) with an
// env worker's Q-network copy θ_a, which serves as both the online and the
// bootstrap network — an actor holds no target network:
//
//	δ = r + γ^m (1 − d) max_a' Q(s', a'; θ_a) − Q(s, a; θ_a),  p = |δ| + ε
//
// r, γ^m and d are the n-step transition's Rewards, Discounts and Dones,
// so n-step returns and time-limit cuts are handled as the learner does.
// With Double DQN the online network both picks and values a', which is
// the max, so the formula is the same.
type prioritizer struct {
	p        *pieces
	q, qNext []float32
}

func (p *pieces) newPrioritizer() (*prioritizer, error) { return &prioritizer{p: p}, nil }

// Prioritize sets tr.Priorities from pol's Q-values.
func (z *prioritizer) Prioritize(tr *sample.Transitions, pol algo.PolicyNet) error {
	n, k, d := tr.N, z.p.actions.N, z.p.obsDim
	tr.Priorities = tr.Priorities[:0]
	if pol.OutDim() != k {
		return fmt.Errorf("dqn: prioritize: the policy has %d outputs, want one Q-value per action (%d)", pol.OutDim(), k)
	}
	if tr.ObsDim != d || tr.ActDim != 1 || n < 0 || len(tr.Obs) != n*d || len(tr.NextObs) != n*d ||
		len(tr.Actions) != n || len(tr.Rewards) != n || len(tr.Discounts) != n || len(tr.Dones) != n {
		return fmt.Errorf("%w: dqn: prioritize: %d transitions of obs %d, action %d with %d, %d, %d, %d, %d, %d values",
			sample.ErrShape, n, tr.ObsDim, tr.ActDim, len(tr.Obs), len(tr.Actions), len(tr.Rewards), len(tr.NextObs), len(tr.Discounts), len(tr.Dones))
	}
	if n == 0 {
		return nil
	}
	z.q, z.qNext = scratch.Resize(z.q, n*k), scratch.Resize(z.qNext, n*k)
	q := pol.ForwardTo(z.q, tr.Obs, n)
	qn := pol.ForwardTo(z.qNext, tr.NextObs, n)
	eps := z.p.cfg.PriorityEps
	for i := range n {
		a := int(tr.Actions[i])
		if a < 0 || a >= k || float32(a) != tr.Actions[i] {
			tr.Priorities = tr.Priorities[:0]
			return fmt.Errorf("dqn: prioritize: transition %d has action %v, want an index in [0, %d)", i, tr.Actions[i], k)
		}
		row := qn[i*k : (i+1)*k]
		m := row[0]
		for _, v := range row[1:] {
			m = max(m, v)
		}
		y := tr.Rewards[i] + tr.Discounts[i]*(1-tr.Dones[i])*m
		p := math.Abs(float64(y-q[i*k+a])) + eps
		if math.IsNaN(p) || math.IsInf(p, 0) {
			tr.Priorities = tr.Priorities[:0]
			return fmt.Errorf("dqn: prioritize: transition %d has TD error %v (diverged Q-values?)", i, y-q[i*k+a])
		}
		tr.Priorities = append(tr.Priorities, float32(p))
	}
	return nil
}
