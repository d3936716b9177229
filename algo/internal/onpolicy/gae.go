package onpolicy

import "math"

// GAE writes generalized advantage estimates into adv for a rollout of T
// steps of N envs stored step-major (index t·N + i), and returns adv
// (Schulman et al. 2016, "High-Dimensional Continuous Control Using
// Generalized Advantage Estimation", eq. 16; CleanRL ppo.py):
//
//	δ_t = r_t + γ·(1 − d_t)·V(s_{t+1}) − V(s_t)
//	Â_t = δ_t + γλ·(1 − d_t)·Â_{t+1}
//
// dones[t·N+i] is 1 when env i's episode ended (terminated or truncated) at
// step t, so nothing flows across the reset; V(s_{t+1}) is values at t+1,
// or lastValues (the values of the observations after the last step) at
// t = T−1. A truncated episode is bootstrapped by folding γ·V(final
// observation) into its last reward before calling GAE (BootstrapTruncated),
// which keeps this function the textbook one.
//
// λ = 1 gives the n-step (Monte-Carlo within the rollout) advantage that
// A2C uses; λ = 0 the one-step TD error. Sums run backwards in float32, as
// CleanRL's torch code does.
func GAE(adv, rewards, values, dones, lastValues []float32, n int, gamma, lambda float32) []float32 {
	total := len(rewards)
	if len(adv) != total || len(values) != total || len(dones) != total || len(lastValues) != n || n <= 0 || total%n != 0 {
		panic("onpolicy: GAE: mismatched lengths")
	}
	T := total / n
	for i := range n {
		var lastGAELam float32
		nextValue := lastValues[i]
		for t := T - 1; t >= 0; t-- {
			k := t*n + i
			nextNonTerminal := 1 - dones[k]
			delta := rewards[k] + gamma*nextValue*nextNonTerminal - values[k]
			lastGAELam = delta + gamma*lambda*nextNonTerminal*lastGAELam
			adv[k] = lastGAELam
			nextValue = values[k]
		}
	}
	return adv
}

// ReturnsTo writes the critic's targets returns = adv + values into dst and
// returns dst (CleanRL: returns = advantages + values).
func ReturnsTo(dst, adv, values []float32) []float32 {
	for k := range dst {
		dst[k] = adv[k] + values[k]
	}
	return dst
}

// NormalizeTo writes (x − mean(x)) / (std(x) + 1e-8) into dst, with the
// unbiased standard deviation torch.std uses (PPO's per-minibatch advantage
// normalization). Sums run in float64 in index order. A single element
// normalizes to 0.
func NormalizeTo(dst, x []float32) []float32 {
	var sum float64
	for _, v := range x {
		sum += float64(v)
	}
	mean := sum / float64(len(x))
	var ss float64
	for _, v := range x {
		d := float64(v) - mean
		ss += d * d
	}
	return NormalizeWith(dst, x, mean, Std(ss, len(x)))
}

// Std is the unbiased standard deviation of n values whose squared
// deviations from their mean sum to ss (0 for a single value).
func Std(ss float64, n int) float64 {
	if n > 1 {
		return math.Sqrt(ss / float64(n-1))
	}
	return 0
}

// NormalizeWith writes (x − mean) / (std + 1e-8) into dst: NormalizeTo with
// statistics computed elsewhere (data-parallel learners normalise a
// minibatch spread over several of them by its union's mean and std).
func NormalizeWith(dst, x []float32, mean, std float64) []float32 {
	for k, v := range x {
		dst[k] = float32((float64(v) - mean) / (std + 1e-8))
	}
	return dst
}

// ExplainedVariance returns 1 − Var(returns − values)/Var(returns), the
// share of the returns' variance the critic explains (NaN when the returns
// are constant), as CleanRL logs it.
func ExplainedVariance(values, returns []float32) float64 {
	var my, md float64
	for k := range returns {
		my += float64(returns[k])
		md += float64(returns[k] - values[k])
	}
	n := float64(len(returns))
	my /= n
	md /= n
	var vy, vd float64
	for k := range returns {
		y := float64(returns[k]) - my
		d := float64(returns[k]-values[k]) - md
		vy += y * y
		vd += d * d
	}
	if vy == 0 {
		return math.NaN()
	}
	return 1 - vd/vy
}
