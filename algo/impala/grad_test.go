package impala

import (
	"math"
	"testing"

	"herd/algo/internal/learntest"
	"herd/internal/rng"
)

// TestIMPALALossGradients: the hand-written dL/dlog π, dL/dH and dL/dV of
// the learner's loss halves match central differences of an independent
// float64 reference of
//
//	L = −mean(A·log π) − c_ent·mean(H) + c_vf·½·mean((V − v)²)
//
// with A and v the (fixed) V-trace advantages and targets, and the
// reported losses match it too.
func TestIMPALALossGradients(t *testing.T) {
	cfg := DefaultConfig()
	cfg.EntCoef, cfg.VFCoef = 0.03, 0.7
	const B = 20
	r := rng.New(1, "test/impala-grad", 0)
	l := &learner{cfg: &cfg, adv: make([]float32, B), vs: make([]float32, B)}
	lp, ent, v := make([]float32, B), make([]float32, B), make([]float32, B)
	for k := range B {
		lp[k] = float32(-1 + 0.3*r.NormFloat64())
		ent[k] = float32(0.5 + 0.1*r.NormFloat64())
		v[k] = float32(r.NormFloat64())
		l.adv[k] = float32(r.NormFloat64())
		l.vs[k] = float32(r.NormFloat64())
	}
	dLogProb, dEntropy, dValue := make([]float32, B), make([]float32, B), make([]float32, B)
	l.policy(dLogProb, dEntropy, lp, ent)
	l.value(dValue, v)

	lp64, ent64, v64 := learntest.To64(lp), learntest.To64(ent), learntest.To64(v)
	f := func() float64 {
		var pg, h, vl float64
		for k := range B {
			pg -= float64(l.adv[k]) * lp64[k]
			h += ent64[k]
			d := v64[k] - float64(l.vs[k])
			vl += 0.5 * d * d
		}
		return (pg - float64(cfg.EntCoef)*h + float64(cfg.VFCoef)*vl) / B
	}
	learntest.CheckGrad(t, "dL/dlog π", dLogProb, learntest.NumGrad(lp64, f))
	learntest.CheckGrad(t, "dL/dH", dEntropy, learntest.NumGrad(ent64, f))
	learntest.CheckGrad(t, "dL/dV", dValue, learntest.NumGrad(v64, f))
	got := l.pgLoss - float64(cfg.EntCoef)*l.entMean + float64(cfg.VFCoef)*l.vLoss
	if want := f(); math.Abs(got-want) > 1e-5*max(1, math.Abs(want)) {
		t.Errorf("reported loss %v, reference %v", got, want)
	}
}
