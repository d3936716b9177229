package impala

import "math"

// VTrace writes the V-trace targets vs and the policy-gradient advantages
// pgAdv of a segment of T steps of n envs stored step-major (index t·n+i)
// (Espeholt et al. 2018, "IMPALA", eq. 1 and §4.2, with the λ of its
// Remark 2 in the trace coefficients; λ = 1 is eq. 1 as printed):
//
//	ρ_t = min(ρ̄, π(a_t|x_t)/μ(a_t|x_t)),   c_t = λ·min(c̄, π(a_t|x_t)/μ(a_t|x_t))
//	γ_t = γ·(1 − d_t)                        (no bootstrap across an episode's end)
//	δ_t = ρ_t·(r_t + γ_t·V(x_{t+1}) − V(x_t))
//	v_s = V(x_s) + δ_s + γ_s·c_s·(v_{s+1} − V(x_{s+1}))
//	A_s = ρ_s·(r_s + γ_s·v_{s+1} − V(x_s))
//
// which unrolls to eq. 1, v_s = V(x_s) + Σ_{t≥s} γ^{t−s}·(Π_{i=s}^{t−1} c_i)·δ_t,
// with v_T = V(x_T) = bootstrap[i] after the last step. logRhos holds
// log π − log μ of the actions taken; values V(x_t) under the current
// critic; dones[t·n+i] = 1 when env i's episode ended at step t. rhoBar and
// cBar may be +Inf (no truncation); lambda in [0, 1] mixes the 1-step
// target (0) and eq. 1's (1). Sums run backwards in float64. It
// returns an error-free result for any finite input; the caller sizes
// every slice (T·n, bootstrap n).
func VTrace(vs, pgAdv, logRhos, rewards, values, dones, bootstrap []float32, n int, gamma, rhoBar, cBar, lambda float32) {
	total := len(rewards)
	if n <= 0 || total%n != 0 || len(vs) != total || len(pgAdv) != total || len(logRhos) != total ||
		len(values) != total || len(dones) != total || len(bootstrap) != n {
		panic("impala: VTrace: mismatched lengths")
	}
	T := total / n
	g, rb, cb, lam := float64(gamma), float64(rhoBar), float64(cBar), float64(lambda)
	for i := range n {
		nextV := float64(bootstrap[i]) // V(x_{t+1})
		nextVs := nextV                // v_{t+1}
		for t := T - 1; t >= 0; t-- {
			k := t*n + i
			ratio := math.Exp(float64(logRhos[k]))
			rho, c := math.Min(rb, ratio), lam*math.Min(cb, ratio)
			gt := g * (1 - float64(dones[k]))
			v := float64(values[k])
			delta := rho * (float64(rewards[k]) + gt*nextV - v)
			vsk := v + delta + gt*c*(nextVs-nextV)
			pgAdv[k] = float32(rho * (float64(rewards[k]) + gt*nextVs - v))
			vs[k] = float32(vsk)
			nextV, nextVs = v, vsk
		}
	}
}
