package nn

import (
	"math"
	"math/rand/v2"
)

// Categorical is the softmax distribution over N discrete actions that a
// policy's logits define, one row of N logits per batch element (PPO, A2C
// on discrete action spaces). Its methods are plain functions of the
// logits: they keep no state, allocate nothing, and compute each row's
// log-sum-exp in float64 for accuracy.
//
//	log π(a|s) = z_a − log Σ_j exp z_j
//	H = −Σ_j π_j log π_j
type Categorical struct{ N int }

func (c Categorical) rows(op string, logits []float32) int {
	if c.N <= 0 || len(logits)%c.N != 0 {
		shapePanic("Categorical.%s: len(logits)=%d is not a multiple of N=%d", op, len(logits), c.N)
	}
	return len(logits) / c.N
}

// lse returns max and log Σ exp(z − max) for one row.
func lse(z []float32) (mx, ls float64) {
	mx = math.Inf(-1)
	for _, v := range z {
		mx = math.Max(mx, float64(v))
	}
	var s float64
	for _, v := range z {
		s += math.Exp(float64(v) - mx)
	}
	return mx, math.Log(s)
}

// LogSoftmaxTo writes log π for every action into dst (same length as
// logits) and returns dst.
func (c Categorical) LogSoftmaxTo(dst, logits []float32) []float32 {
	b := c.rows("LogSoftmaxTo", logits)
	if len(dst) != len(logits) {
		shapePanic("Categorical.LogSoftmaxTo: len(dst)=%d, want %d", len(dst), len(logits))
	}
	for r := 0; r < b; r++ {
		z := logits[r*c.N : (r+1)*c.N]
		mx, ls := lse(z)
		for j, v := range z {
			dst[r*c.N+j] = float32(float64(v) - mx - ls)
		}
	}
	return dst
}

// ProbsTo writes π for every action into dst and returns dst.
func (c Categorical) ProbsTo(dst, logits []float32) []float32 {
	c.LogSoftmaxTo(dst, logits)
	for i, v := range dst {
		dst[i] = float32(math.Exp(float64(v)))
	}
	return dst
}

// SampleTo draws one action per row by inverse CDF with r and returns dst.
func (c Categorical) SampleTo(dst []int, logits []float32, r *rand.Rand) []int {
	b := c.rows("SampleTo", logits)
	if len(dst) != b {
		shapePanic("Categorical.SampleTo: len(dst)=%d, want %d rows", len(dst), b)
	}
	for row := 0; row < b; row++ {
		z := logits[row*c.N : (row+1)*c.N]
		mx, ls := lse(z)
		u := r.Float64()
		a := c.N - 1 // rounding can leave the CDF just below u: take the last action
		var cdf float64
		for j, v := range z {
			cdf += math.Exp(float64(v) - mx - ls)
			if u < cdf {
				a = j
				break
			}
		}
		dst[row] = a
	}
	return dst
}

// ArgmaxTo writes the most likely action of each row (the first on ties)
// into dst and returns dst. It is also the greedy action of a Q head.
func (c Categorical) ArgmaxTo(dst []int, logits []float32) []int {
	b := c.rows("ArgmaxTo", logits)
	if len(dst) != b {
		shapePanic("Categorical.ArgmaxTo: len(dst)=%d, want %d rows", len(dst), b)
	}
	for r := 0; r < b; r++ {
		z := logits[r*c.N : (r+1)*c.N]
		best := 0
		for j, v := range z {
			if v > z[best] {
				best = j
			}
		}
		dst[r] = best
	}
	return dst
}

func (c Categorical) checkActions(op string, actions []int, b int) {
	if len(actions) != b {
		shapePanic("Categorical.%s: len(actions)=%d, want %d rows", op, len(actions), b)
	}
	for i, a := range actions {
		if a < 0 || a >= c.N {
			shapePanic("Categorical.%s: actions[%d]=%d out of [0,%d)", op, i, a, c.N)
		}
	}
}

// LogProbTo writes log π(actions[r] | row r) into dst (one per row).
func (c Categorical) LogProbTo(dst []float32, logits []float32, actions []int) []float32 {
	b := c.rows("LogProbTo", logits)
	c.checkActions("LogProbTo", actions, b)
	if len(dst) != b {
		shapePanic("Categorical.LogProbTo: len(dst)=%d, want %d rows", len(dst), b)
	}
	for r := 0; r < b; r++ {
		z := logits[r*c.N : (r+1)*c.N]
		mx, ls := lse(z)
		dst[r] = float32(float64(z[actions[r]]) - mx - ls)
	}
	return dst
}

// EntropyTo writes each row's entropy H = −Σ π log π into dst.
func (c Categorical) EntropyTo(dst, logits []float32) []float32 {
	b := c.rows("EntropyTo", logits)
	if len(dst) != b {
		shapePanic("Categorical.EntropyTo: len(dst)=%d, want %d rows", len(dst), b)
	}
	for r := 0; r < b; r++ {
		dst[r] = float32(rowEntropy(logits[r*c.N : (r+1)*c.N]))
	}
	return dst
}

func rowEntropy(z []float32) float64 {
	mx, ls := lse(z)
	var h float64
	for _, v := range z {
		lp := float64(v) - mx - ls
		h -= math.Exp(lp) * lp
	}
	return h
}

// Backward writes dL/dlogits into dLogits (same length as logits) for a
// loss that depends on the rows' log-probabilities and entropies through
// dLogProb[r] = dL/dlog π(a_r) and dEntropy[r] = dL/dH_r:
//
//	dL/dz_j = dLogProb·(1[j=a] − π_j) − dEntropy·π_j(log π_j + H)
//
// Either gradient may be nil (treated as zero); actions may be nil when
// dLogProb is. dLogits is overwritten and returned.
func (c Categorical) Backward(dLogits, logits []float32, actions []int, dLogProb, dEntropy []float32) []float32 {
	b := c.rows("Backward", logits)
	if len(dLogits) != len(logits) || (dLogProb != nil && len(dLogProb) != b) || (dEntropy != nil && len(dEntropy) != b) {
		shapePanic("Categorical.Backward: len(dLogits)=%d len(dLogProb)=%d len(dEntropy)=%d for %d rows", len(dLogits), len(dLogProb), len(dEntropy), b)
	}
	if dLogProb != nil {
		c.checkActions("Backward", actions, b)
	}
	for r := 0; r < b; r++ {
		z := logits[r*c.N : (r+1)*c.N]
		dz := dLogits[r*c.N : (r+1)*c.N]
		mx, ls := lse(z)
		var gl, ge, h float64
		if dLogProb != nil {
			gl = float64(dLogProb[r])
		}
		if dEntropy != nil {
			ge = float64(dEntropy[r])
			for _, v := range z {
				lp := float64(v) - mx - ls
				h -= math.Exp(lp) * lp
			}
		}
		for j, v := range z {
			lp := float64(v) - mx - ls
			p := math.Exp(lp)
			g := -gl*p - ge*p*(lp+h)
			if dLogProb != nil && j == actions[r] {
				g += gl
			}
			dz[j] = float32(g)
		}
	}
	return dLogits
}
