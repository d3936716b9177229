package offpolicy

import "math/rand/v2"

// AddGaussianNoise perturbs deterministic actions for exploration (TD3 and
// DDPG, CleanRL's td3/ddpg_continuous_action.py):
//
//	a ← clip(a + ε·scale, low, high),   ε ~ N(0, σ²)
//
// with one draw from r per action value, row-major. scale, low and high
// have one entry per action coordinate; actions may hold several rows.
func AddGaussianNoise(actions, scale, low, high []float32, sigma float64, r *rand.Rand) {
	d := len(scale)
	for i := range actions {
		j := i % d
		noise := r.NormFloat64() * sigma
		actions[i] = clamp32(actions[i]+float32(noise)*scale[j], low[j], high[j])
	}
}

// AddOUNoise advances ou one step and perturbs actions with it:
//
//	a ← clip(a + x·scale, low, high)
//
// It also draws (and drops) one normal from r per action value, as the
// Gaussian path does: the first version of TD3's OU option did so, and
// keeping the draw keeps every earlier run bit-identical.
func AddOUNoise(actions, scale, low, high []float32, ou *OU, r *rand.Rand) {
	ou.Sample(r)
	d := len(scale)
	for i := range actions {
		j := i % d
		_ = r.NormFloat64()
		actions[i] = clamp32(actions[i]+float32(ou.X[i])*scale[j], low[j], high[j])
	}
}

func clamp32(x, lo, hi float32) float32 { return max(lo, min(hi, x)) }

// Mean is the float64 mean of xs (NaN when empty), for logging Q values.
func Mean(xs []float32) float64 {
	var s float64
	for _, x := range xs {
		s += float64(x)
	}
	return s / float64(len(xs))
}
