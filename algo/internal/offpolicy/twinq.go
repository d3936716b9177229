package offpolicy

import (
	"herd/internal/twin"
	"herd/nn"
)

// Twin is a pair of critics (clipped double-Q learning: TD3, SAC)
// evaluated side by side, Q1 on the caller's goroutine and Q2 on the
// worker of par, so that a training step uses both cores of a small
// machine. The two networks share nothing but their read-only inputs, and
// each is computed by one goroutine in a fixed order, so results are
// bit-identical to computing Q1 then Q2 (par nil or closed).
//
// The jobs handed to par are built once by NewTwin, so calls do not
// allocate. A Twin is used by one goroutine.
type Twin struct {
	Q1, Q2 *nn.Critic
	par    *twin.Pair

	// Operands and results of the current call.
	obs, act, y []float32
	b           int
	out2        []float32 // Forward's Q2 result
	d2          []float32 // Backward's Q2 input
	g2          []float32 // Backward's Q2 result (dL/da)
	l1, l2      float32   // Fit losses
	dQ1, dQ2    []float32 // Fit workspaces
	q1, q2      []float32 // Fit: Q1(s, a) and Q2(s, a), kept for the log

	fwd2, bwd2, fit2 func()
}

// NewTwin pairs q1 and q2 on par (nil: sequential) for batches up to
// maxBatch.
func NewTwin(q1, q2 *nn.Critic, par *twin.Pair, maxBatch int) *Twin {
	t := &Twin{Q1: q1, Q2: q2, par: par,
		dQ1: make([]float32, maxBatch), dQ2: make([]float32, maxBatch),
		q1: make([]float32, maxBatch), q2: make([]float32, maxBatch)}
	t.fwd2 = func() { t.out2 = t.Q2.Forward(t.obs, t.act, t.b) }
	t.bwd2 = func() { t.g2 = t.Q2.Backward(t.d2) }
	t.fit2 = func() { t.l2 = fitOne(t.Q2, t.obs, t.act, t.y, t.b, t.dQ2[:t.b], t.q2[:t.b]) }
	return t
}

// Forward returns Q1(obs, act) and Q2(obs, act) (each network's workspace,
// valid until its next Forward).
func (t *Twin) Forward(obs, act []float32, b int) (q1, q2 []float32) {
	t.obs, t.act, t.b = obs, act, b
	t.par.Go(t.fwd2)
	q1 = t.Q1.Forward(obs, act, b)
	t.par.Wait()
	return q1, t.out2
}

// Backward back-propagates d1 through Q1 and d2 through Q2 (after their
// last Forward), adding into their gradients, and returns dL/da of each.
func (t *Twin) Backward(d1, d2 []float32) (g1, g2 []float32) {
	t.d2 = d2
	t.par.Go(t.bwd2)
	g1 = t.Q1.Backward(d1)
	t.par.Wait()
	return g1, t.g2
}

// Fit takes one optimizer step on both critics' regression onto a shared
// target y (clipped double-Q learning, Fujimoto et al. 2018; SAC, Haarnoja
// et al. 2018): FitGrad, then opt's step over params, Q1's parameters then
// Q2's (one Adam over both, as CleanRL). It returns the loss and the batch
// means of Q1 and Q2, which the algorithms log.
func (t *Twin) Fit(opt *nn.Adam, params []*nn.Param, obs, act, y []float32, b int) (loss, q1Mean, q2Mean float64) {
	loss, q1Mean, q2Mean = t.FitGrad(obs, act, y, b)
	opt.Step(params)
	return loss, q1Mean, q2Mean
}

// FitGrad sets both critics' gradients for
//
//	L = MSE(Q1(s, a), y) + MSE(Q2(s, a), y)
//
// and returns L and the batch means of Q1 and Q2.
func (t *Twin) FitGrad(obs, act, y []float32, b int) (loss, q1Mean, q2Mean float64) {
	t.obs, t.act, t.y, t.b = obs, act, y, b
	t.par.Go(t.fit2)
	t.l1 = fitOne(t.Q1, obs, act, y, b, t.dQ1[:b], t.q1[:b])
	t.par.Wait()
	return float64(t.l1 + t.l2), Mean(t.q1[:b]), Mean(t.q2[:b])
}

// fitOne zeroes q's gradients, then runs forward, MSE onto y and backward,
// and copies Q(s, a) into keep.
func fitOne(q *nn.Critic, obs, act, y []float32, b int, dQ, keep []float32) float32 {
	q.ZeroGrad()
	out := q.Forward(obs, act, b)
	l := nn.MSE(dQ, out, y)
	copy(keep, out) // Backward may reuse the output buffer
	q.Backward(dQ)
	return l
}
