package ppo

import (
	"math"
	"testing"

	"herd/algo/internal/learntest"
	"herd/internal/rng"
)

// ppoLoss64 is an independent float64 reference of PPO's loss on one
// minibatch as a function of the new log-probabilities, entropies and
// values (CleanRL ppo.py):
//
//	L = mean(max(−Â·ρ, −Â·clip(ρ, 1−ε, 1+ε))) − c_ent·mean(H) + c_vf·½·mean(max((V−R)², (V_old + clip(V−V_old, −ε, ε) − R)²))
func ppoLoss64(cfg *Config, mb *minibatch, lp, ent, v []float64) float64 {
	B := len(lp)
	adv := learntest.To64(mb.adv)
	if cfg.NormAdv {
		var mean, ss float64
		for _, a := range adv {
			mean += a
		}
		mean /= float64(B)
		for _, a := range adv {
			ss += (a - mean) * (a - mean)
		}
		std := math.Sqrt(ss / float64(B-1))
		for r := range adv {
			adv[r] = (adv[r] - mean) / (std + 1e-8)
		}
	}
	eps := float64(cfg.ClipCoef)
	var pg, h, vl float64
	for r := range B {
		ratio := math.Exp(lp[r] - float64(mb.logProb[r]))
		pg += max(-adv[r]*ratio, -adv[r]*min(max(ratio, 1-eps), 1+eps))
		h += ent[r]
		ret, old := float64(mb.returns[r]), float64(mb.values[r])
		sq := (v[r] - ret) * (v[r] - ret)
		if cfg.ClipVLoss {
			c := old + min(max(v[r]-old, -eps), eps)
			sq = max(sq, (c-ret)*(c-ret))
		}
		vl += sq
	}
	n := float64(B)
	return pg/n - float64(cfg.EntCoef)*h/n + float64(cfg.VFCoef)*0.5*vl/n
}

// TestPPOLossGradients: the hand-written dL/dlog π, dL/dH and dL/dV of
// policyLoss and valueLoss match central differences of ppoLoss64, with
// and without advantage normalisation and value clipping, on data where
// some rows are clipped (zero gradient) and some are not; the reported
// losses match the reference too.
func TestPPOLossGradients(t *testing.T) {
	for _, c := range []struct{ normAdv, clipV bool }{{true, true}, {false, false}, {true, false}} {
		cfg := DefaultConfig()
		cfg.NormAdv, cfg.ClipVLoss, cfg.EntCoef, cfg.VFCoef = c.normAdv, c.clipV, 0.03, 0.7
		const B = 32
		r := rng.New(1, "test/ppo-grad", 0)
		mb := newMinibatch(1, 1)
		mb.resize(B)
		lp, ent, v := make([]float32, B), make([]float32, B), make([]float32, B)
		for k := range B {
			mb.logProb[k] = float32(-1 + 0.3*r.NormFloat64())
			lp[k] = mb.logProb[k] + float32(0.3*r.NormFloat64()) // ratios inside and outside 1 ± 0.2
			ent[k] = float32(0.5 + 0.1*r.NormFloat64())
			mb.adv[k] = float32(r.NormFloat64())
			mb.values[k] = float32(r.NormFloat64())
			v[k] = mb.values[k] + float32(0.4*r.NormFloat64())
			mb.returns[k] = float32(r.NormFloat64())
		}
		l := newLosses(&cfg, mb)
		dLogProb, dEntropy, dValue := make([]float32, B), make([]float32, B), make([]float32, B)
		l.policyLoss(dLogProb, dEntropy, lp, ent)
		l.valueLoss(dValue, v)

		lp64, ent64, v64 := learntest.To64(lp), learntest.To64(ent), learntest.To64(v)
		f := func() float64 { return ppoLoss64(&cfg, mb, lp64, ent64, v64) }
		learntest.CheckGrad(t, "dL/dlog π", dLogProb, learntest.NumGrad(lp64, f))
		learntest.CheckGrad(t, "dL/dH", dEntropy, learntest.NumGrad(ent64, f))
		learntest.CheckGrad(t, "dL/dV", dValue, learntest.NumGrad(v64, f))
		got := l.pgLoss - float64(cfg.EntCoef)*l.entropy + float64(cfg.VFCoef)*l.vLoss
		if want := f(); math.Abs(got-want) > 1e-5*max(1, math.Abs(want)) {
			t.Errorf("%+v: reported loss %v, reference %v", c, got, want)
		}
		// Both sides of each clip are exercised.
		var flatPG, flatV int
		for k := range B {
			if dLogProb[k] == 0 {
				flatPG++
			}
			if dValue[k] == 0 {
				flatV++
			}
		}
		if flatPG == 0 || flatPG == B || (c.clipV && (flatV == 0 || flatV == B)) {
			t.Errorf("%+v: %d of %d rows clipped in the surrogate, %d in the value loss: the data miss a branch", c, flatPG, B, flatV)
		}
	}
}
