package offpolicy

import (
	"math/rand/v2"

	"herd/algo"
	"herd/env"
	"herd/internal/scratch"
)

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

// SizeActs sizes dst's Actions and EnvActions for n rows of d values.
func SizeActs(dst *algo.Acts, n, d int) {
	dst.Actions = scratch.Resize(dst.Actions, n*d)
	dst.EnvActions = scratch.Resize(dst.EnvActions, n*d)
}

// RandomActionsTo fills the n rows of dst (d values each) with uniformly
// random actions of space drawn from r, env by env: the exploration before
// learning starts.
func RandomActionsTo(dst []float32, space env.Space, n, d int, r *rand.Rand) {
	for i := range n {
		space.SampleTo(dst[i*d:(i+1)*d], r)
	}
}

// NoisySampler is the sampler (algo.Sampler) of TD3 and DDPG: uniformly
// random actions before learning starts, then the policy's deterministic
// action μ(s) (its outputs) plus exploration noise scaled to the action
// range and clipped to its bounds (AddGaussianNoise, or AddOUNoise when OU
// is set). OU holds one process per action value of every env, so with OU
// every call must cover all the worker's envs; ResetEnv restarts env i's.
type NoisySampler struct {
	Space          env.Space
	Scale          []float32
	Low, High      []float32
	LearningStarts int64
	Sigma          float64
	OU             *OU
	R              *rand.Rand
}

var (
	_ algo.Sampler     = (*NoisySampler)(nil)
	_ algo.EnvResetter = (*NoisySampler)(nil)
)

// SampleTo fills dst for the n rows of out (n × dim(A), actions in the
// env's units) at global step `step`.
func (s *NoisySampler) SampleTo(dst *algo.Acts, out []float32, n int, step int64) {
	d := len(s.Scale)
	SizeActs(dst, n, d)
	if step < s.LearningStarts {
		RandomActionsTo(dst.Actions, s.Space, n, d, s.R)
	} else {
		copy(dst.Actions, out[:n*d])
		if s.OU != nil {
			AddOUNoise(dst.Actions, s.Scale, s.Low, s.High, s.OU, s.R)
		} else {
			AddGaussianNoise(dst.Actions, s.Scale, s.Low, s.High, s.Sigma, s.R)
		}
	}
	copy(dst.EnvActions, dst.Actions)
}

// ResetEnv restarts env i's OU noise at an episode start.
func (s *NoisySampler) ResetEnv(i int) {
	if s.OU != nil {
		d := len(s.Scale)
		s.OU.Reset(i*d, (i+1)*d)
	}
}
