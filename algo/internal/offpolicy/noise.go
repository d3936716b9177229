package offpolicy

import (
	"math"
	"math/rand/v2"
)

// OU is Ornstein–Uhlenbeck exploration noise (Uhlenbeck & Ornstein 1930;
// used by DDPG, Lillicrap et al. 2016), discretised as Stable-Baselines3's
// OrnsteinUhlenbeckActionNoise:
//
//	x ← x + θ(μ − x)·dt + σ·√dt·N(0, 1),   μ = 0, θ = 0.15, dt = 0.01
//
// Successive values are correlated, so an agent pushes in one direction for
// many steps: what sparse-reward tasks like MountainCarContinuous need.
// X holds the current noise, one value per action coordinate (of every
// env); Reset clears a range at an episode start. No allocation after NewOU.
type OU struct {
	X     []float64
	Sigma float64
	Theta float64
	DT    float64
}

// NewOU returns n zeroed noise processes with scale sigma.
func NewOU(n int, sigma float64) *OU {
	return &OU{X: make([]float64, n), Sigma: sigma, Theta: 0.15, DT: 0.01}
}

// Sample advances every process one step, drawing from r.
func (o *OU) Sample(r *rand.Rand) {
	s := o.Sigma * math.Sqrt(o.DT)
	for i, x := range o.X {
		o.X[i] = x - o.Theta*x*o.DT + s*r.NormFloat64()
	}
}

// Reset sets X[lo:hi] to 0.
func (o *OU) Reset(lo, hi int) { clear(o.X[lo:hi]) }
