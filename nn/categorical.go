package nn

import (
	"math"
	"math/rand/v2"

	"herd/internal/scratch"
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
		// The maximum's term is exp(0) = 1 exactly: no call for it (a
		// fifth of a two-action policy's transcendental calls).
		if d := float64(v) - mx; d != 0 {
			s += math.Exp(d)
		} else {
			s++
		}
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
		dst[row], _ = sampleRow(logits[row*c.N:(row+1)*c.N], r)
	}
	return dst
}

// sampleRow draws one action from the row's logits z by inverse CDF with
// one uniform from r, and returns it with its log-probability (as
// LogProbTo computes it).
func sampleRow(z []float32, r *rand.Rand) (int, float32) {
	mx, ls := lse(z)
	u := r.Float64()
	a := len(z) - 1 // rounding can leave the CDF just below u: take the last action
	var cdf float64
	for j, v := range z {
		cdf += math.Exp(float64(v) - mx - ls)
		if u < cdf {
			a = j
			break
		}
	}
	return a, float32(float64(z[a]) - mx - ls)
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
	var lpA, pA rowBuf
	lp, p := lpA.get(len(z)), pA.get(len(z))
	return evalRow(lp, p, z)
}

// rowBuf holds one row's log π or π on the caller's stack for the action
// counts policies have; get allocates only for wider rows.
type rowBuf [32]float64

func (b *rowBuf) get(n int) []float64 {
	if n <= len(b) {
		return b[:n]
	}
	return make([]float64, n)
}

// evalRow writes log π_j = z_j − max − log Σ exp(z − max) into lp and
// π_j = exp(log π_j) into p for one row of logits z, and returns
// H = −Σ_j π_j log π_j. Every method of Categorical and CategoricalRows
// computes a row's log π, π and H here, so they agree bit for bit.
func evalRow(lp, p []float64, z []float32) float64 {
	mx, ls := lse(z)
	var h float64
	for j, v := range z {
		l := float64(v) - mx - ls
		lp[j] = l
		p[j] = math.Exp(l)
		h -= p[j] * l
	}
	return h
}

// gradRow writes one row's dL/dz_j = gl·(1[j=a] − π_j) − ge·π_j(log π_j + h)
// into dz, given log π (lp) and π (p); a < 0 names no action (gl is then
// zero).
func gradRow(dz []float32, lp, p []float64, h, gl, ge float64, a int) {
	for j := range dz {
		g := -gl*p[j] - ge*p[j]*(lp[j]+h)
		if j == a {
			g += gl
		}
		dz[j] = float32(g)
	}
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
	var lpA, pA rowBuf
	lp, p := lpA.get(c.N), pA.get(c.N)
	for r := 0; r < b; r++ {
		h := evalRow(lp, p, logits[r*c.N:(r+1)*c.N])
		backwardRow(dLogits[r*c.N:(r+1)*c.N], lp, p, h, r, actions, dLogProb, dEntropy)
	}
	return dLogits
}

// backwardRow is Backward for row r, given its log π, π and H.
func backwardRow(dz []float32, lp, p []float64, h float64, r int, actions []int, dLogProb, dEntropy []float32) {
	var gl, ge float64
	a := -1
	if dLogProb != nil {
		gl, a = float64(dLogProb[r]), actions[r]
	}
	if dEntropy != nil {
		ge = float64(dEntropy[r])
	} else {
		h = 0 // no entropy term: ge·π_j(log π_j + H) is ±0 either way; keep the sign of zero Backward always gave
	}
	gradRow(dz, lp, p, h, gl, ge, a)
}

// CategoricalRows keeps log π, π and H of every row of one batch of logits,
// so that a policy-gradient step — a minibatch's log-probabilities and
// entropies, then their gradient — takes each row's exps and log once
// instead of once per call. Its results are bit for bit those of
// Categorical's LogProbTo, EntropyTo and Backward on the same logits. The
// zero value with N set is ready; Eval sizes it.
type CategoricalRows struct {
	N     int
	lp, p []float64 // log π and π of the evaluated rows, rows × N
	h     []float64 // H per row
}

// Eval computes log π, π and H of every row of logits (rows of N values),
// replacing the rows held before.
func (c *CategoricalRows) Eval(logits []float32) {
	b := Categorical{N: c.N}.rows("Eval", logits)
	c.lp, c.p, c.h = scratch.Resize(c.lp, len(logits)), scratch.Resize(c.p, len(logits)), scratch.Resize(c.h, b)
	for r := range b {
		lo, hi := r*c.N, (r+1)*c.N
		c.h[r] = evalRow(c.lp[lo:hi], c.p[lo:hi], logits[lo:hi])
	}
}

func (c *CategoricalRows) check(op string, n int) {
	if n != len(c.h) {
		shapePanic("CategoricalRows.%s: %d rows, Eval had %d", op, n, len(c.h))
	}
}

// LogProbTo writes log π(actions[r] | row r) of the evaluated rows into dst.
func (c *CategoricalRows) LogProbTo(dst []float32, actions []int) []float32 {
	c.check("LogProbTo", len(dst))
	Categorical{N: c.N}.checkActions("LogProbTo", actions, len(dst))
	for r, a := range actions {
		dst[r] = float32(c.lp[r*c.N+a])
	}
	return dst
}

// EntropyTo writes each evaluated row's entropy into dst.
func (c *CategoricalRows) EntropyTo(dst []float32) []float32 {
	c.check("EntropyTo", len(dst))
	for r, h := range c.h {
		dst[r] = float32(h)
	}
	return dst
}

// Backward is Categorical.Backward on the evaluated rows: it writes
// dL/dlogits into dLogits. Either gradient may be nil; actions may be nil
// when dLogProb is.
func (c *CategoricalRows) Backward(dLogits []float32, actions []int, dLogProb, dEntropy []float32) []float32 {
	b := len(c.h)
	if len(dLogits) != b*c.N || (dLogProb != nil && len(dLogProb) != b) || (dEntropy != nil && len(dEntropy) != b) {
		shapePanic("CategoricalRows.Backward: len(dLogits)=%d len(dLogProb)=%d len(dEntropy)=%d for %d rows of %d", len(dLogits), len(dLogProb), len(dEntropy), b, c.N)
	}
	if dLogProb != nil {
		Categorical{N: c.N}.checkActions("Backward", actions, b)
	}
	for r := range b {
		lo, hi := r*c.N, (r+1)*c.N
		backwardRow(dLogits[lo:hi], c.lp[lo:hi], c.p[lo:hi], c.h[r], r, actions, dLogProb, dEntropy)
	}
	return dLogits
}
