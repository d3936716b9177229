package nn

import (
	"fmt"
	"math/rand/v2"

	"herd/internal/scratch"
)

// GatherTo writes q[r][actions[r]] into dst for every row of the n-wide
// Q-value matrix q (DQN's Q(s, a) for the taken actions) and returns dst.
func GatherTo(dst, q []float32, n int, actions []int) []float32 {
	b := qRows("GatherTo", q, n, dst)
	if len(actions) != b {
		shapePanic("GatherTo: len(actions)=%d, want %d", len(actions), b)
	}
	for r, a := range actions {
		if a < 0 || a >= n {
			shapePanic("GatherTo: actions[%d]=%d out of [0,%d)", r, a, n)
		}
		dst[r] = q[r*n+a]
	}
	return dst
}

// ScatterTo is GatherTo's backward: it zeroes dQ (batch×n) and writes
// dGathered[r] at (r, actions[r]). It returns dQ.
func ScatterTo(dQ []float32, n int, actions []int, dGathered []float32) []float32 {
	b := qRows("ScatterTo", dQ, n, dGathered)
	if len(actions) != b {
		shapePanic("ScatterTo: len(actions)=%d, want %d", len(actions), b)
	}
	clear(dQ)
	for r, a := range actions {
		if a < 0 || a >= n {
			shapePanic("ScatterTo: actions[%d]=%d out of [0,%d)", r, a, n)
		}
		dQ[r*n+a] = dGathered[r]
	}
	return dQ
}

// MaxTo writes max_a q[r][a] into dst (DQN's target max) and returns dst.
func MaxTo(dst, q []float32, n int) []float32 {
	b := qRows("MaxTo", q, n, dst)
	for r := 0; r < b; r++ {
		row := q[r*n : (r+1)*n]
		m := row[0]
		for _, v := range row[1:] {
			m = max(m, v)
		}
		dst[r] = m
	}
	return dst
}

// ArgmaxTo writes the greedy action of each row of q into dst (first on ties).
func ArgmaxTo(dst []int, q []float32, n int) []int {
	return Categorical{N: n}.ArgmaxTo(dst, q)
}

// EpsilonGreedyTo writes, per row, a uniformly random action with
// probability eps and the greedy one otherwise, drawing from r.
func EpsilonGreedyTo(dst []int, q []float32, n int, eps float64, r *rand.Rand) []int {
	ArgmaxTo(dst, q, n)
	for i := range dst {
		if r.Float64() < eps {
			dst[i] = r.IntN(n)
		}
	}
	return dst
}

func qRows(op string, q []float32, n int, perRow []float32) int {
	if n <= 0 || len(q)%n != 0 {
		shapePanic("%s: len(q)=%d not a multiple of n=%d", op, len(q), n)
	}
	b := len(q) / n
	if len(perRow) != b {
		shapePanic("%s: per-row buffer of %d, want %d", op, len(perRow), b)
	}
	return b
}

// ConcatTo writes rows [a_r, b_r] into dst (batch×(aDim+bDim)), where a is
// batch×aDim and b is batch×bDim, and returns dst. A state-action critic's
// input is ConcatTo(x, obs, obsDim, act, actDim).
func ConcatTo(dst, a []float32, aDim int, b []float32, bDim int) []float32 {
	if aDim <= 0 || bDim <= 0 || len(a)%aDim != 0 || len(a)/aDim*bDim != len(b) || len(dst) != len(a)+len(b) {
		shapePanic("ConcatTo: len(a)=%d aDim=%d len(b)=%d bDim=%d len(dst)=%d", len(a), aDim, len(b), bDim, len(dst))
	}
	w := aDim + bDim
	for r := 0; r < len(a)/aDim; r++ {
		copy(dst[r*w:], a[r*aDim:(r+1)*aDim])
		copy(dst[r*w+aDim:], b[r*bDim:(r+1)*bDim])
	}
	return dst
}

// SplitTo is ConcatTo's inverse (and its backward): it copies the first
// aDim columns of each row of x into dstA and the rest into dstB. Either
// destination may be nil to skip it.
func SplitTo(dstA, dstB, x []float32, aDim, bDim int) {
	w := aDim + bDim
	if aDim <= 0 || bDim <= 0 || len(x)%w != 0 {
		shapePanic("SplitTo: len(x)=%d aDim=%d bDim=%d", len(x), aDim, bDim)
	}
	b := len(x) / w
	if (dstA != nil && len(dstA) != b*aDim) || (dstB != nil && len(dstB) != b*bDim) {
		shapePanic("SplitTo: len(dstA)=%d len(dstB)=%d for %d rows", len(dstA), len(dstB), b)
	}
	for r := 0; r < b; r++ {
		if dstA != nil {
			copy(dstA[r*aDim:(r+1)*aDim], x[r*w:r*w+aDim])
		}
		if dstB != nil {
			copy(dstB[r*bDim:(r+1)*bDim], x[r*w+aDim:(r+1)*w])
		}
	}
}

// Critic is a state-action value network Q(s, a) for continuous actions
// (DDPG, TD3, SAC): an MLP over concat(obs, action) with one output. It
// owns the concatenation buffer and the action-gradient buffer, so Forward
// and Backward do not allocate after warm-up. Not safe for concurrent use.
type Critic struct {
	Net            *MLP
	ObsDim, ActDim int
	x, dAct        []float32
}

// NewCritic builds a critic; cfg.In must be 0 or ObsDim+ActDim and cfg.Out
// 0 or 1 (both are filled in).
func NewCritic(obsDim, actDim int, cfg MLPConfig, r *rand.Rand) (*Critic, error) {
	if obsDim <= 0 || actDim <= 0 {
		return nil, fmt.Errorf("%w: Critic obsDim=%d actDim=%d", ErrConfig, obsDim, actDim)
	}
	if (cfg.In != 0 && cfg.In != obsDim+actDim) || (cfg.Out != 0 && cfg.Out != 1) {
		return nil, fmt.Errorf("%w: Critic cfg In=%d Out=%d, want %d and 1", ErrConfig, cfg.In, cfg.Out, obsDim+actDim)
	}
	cfg.In, cfg.Out = obsDim+actDim, 1
	net, err := NewMLP(cfg, r)
	if err != nil {
		return nil, err
	}
	return &Critic{Net: net, ObsDim: obsDim, ActDim: actDim}, nil
}

// Forward returns Q(obs_r, act_r) for each of the batch rows (a workspace
// slice valid until the next Forward).
func (c *Critic) Forward(obs, act []float32, batch int) []float32 {
	if len(obs) != batch*c.ObsDim || len(act) != batch*c.ActDim {
		shapePanic("Critic.Forward: len(obs)=%d len(act)=%d for batch %d", len(obs), len(act), batch)
	}
	c.x = scratch.Resize(c.x, batch*(c.ObsDim+c.ActDim))
	ConcatTo(c.x, obs, c.ObsDim, act, c.ActDim)
	return c.Net.Forward(c.x, batch)
}

// Backward accumulates parameter gradients for dQ = dL/dQ (one per row)
// and returns dL/daction (batch×ActDim, a workspace slice): the deterministic
// policy gradient flows back into the actor through it.
func (c *Critic) Backward(dQ []float32) []float32 {
	dx := c.Net.Backward(dQ)
	c.dAct = scratch.Resize(c.dAct, len(dQ)*c.ActDim)
	SplitTo(nil, c.dAct, dx, c.ObsDim, c.ActDim)
	return c.dAct
}

// Params returns the critic network's parameters.
func (c *Critic) Params() []*Param { return c.Net.Params() }

// ZeroGrad zeroes the critic's gradients.
func (c *Critic) ZeroGrad() { c.Net.ZeroGrad() }

// Clone returns an independent copy (for a target network).
func (c *Critic) Clone() *Critic {
	return &Critic{Net: c.Net.Clone(), ObsDim: c.ObsDim, ActDim: c.ActDim}
}
