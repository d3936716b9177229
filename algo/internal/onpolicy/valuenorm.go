package onpolicy

import (
	"math"

	"herd/nn"
)

// ValueNorm is MAPPO's value normalization (Yu et al. 2022, "value
// normalization"; the authors' ValueNorm, the running mean/std form, not
// PopArt): the critic learns normalized targets (R − μ)/σ and its output
// is denormalized, V = σ·v + μ, wherever a value leaves the agent (the
// policy rows, the bootstraps, GAE). μ and σ are debiased exponential
// moving averages of the targets' batch mean and mean square, updated
// with each minibatch's targets before its loss:
//
//	m ← β·m + (1−β)·mean(R),  s ← β·s + (1−β)·mean(R²),  d ← β·d + (1−β)
//	μ = m / max(d, 1e-5),  σ² = max(s / max(d, 1e-5) − μ², 1e-2)
//
// with β = 0.99999. Its state (m, s, d) is a parameter named "value_norm"
// that no gradient moves, so the weights a policy acts with carry it.
type ValueNorm struct{ p *nn.Param }

const (
	vnBeta   = 0.99999
	vnEps    = 1e-5
	vnMinVar = 1e-2
)

func newValueNorm() *ValueNorm { return &ValueNorm{p: nn.NewParam("value_norm", 3)} }

// Update folds one batch of targets into the statistics.
func (v *ValueNorm) Update(x []float32) {
	if len(x) == 0 {
		return
	}
	var s, sq float64
	for _, r := range x {
		s += float64(r)
		sq += float64(r) * float64(r)
	}
	n := float64(len(x))
	st := v.p.Value
	st[0] = float32(float64(st[0])*vnBeta + s/n*(1-vnBeta))
	st[1] = float32(float64(st[1])*vnBeta + sq/n*(1-vnBeta))
	st[2] = float32(float64(st[2])*vnBeta + (1 - vnBeta))
}

// MeanStd returns the debiased μ and σ.
func (v *ValueNorm) MeanStd() (mean, std float32) {
	st := v.p.Value
	d := max(float64(st[2]), vnEps)
	m := float64(st[0]) / d
	return float32(m), float32(math.Sqrt(max(float64(st[1])/d-m*m, vnMinVar)))
}

// denormalize turns the critic's outputs into values in place.
func (v *ValueNorm) denormalize(x []float32) {
	if v == nil {
		return
	}
	m, s := v.MeanStd()
	for i := range x {
		x[i] = x[i]*s + m
	}
}
