package classic

import (
	"math"

	"herd/env/internal/core"
)

// PendulumConfig holds Pendulum's constructor keywords.
type PendulumConfig struct {
	// G is gravity in m/s²; 0 means Gymnasium's default 10.0.
	G float64
	// NoVel zeroes the angular velocity θ̇ in every observation (the shape
	// stays Box(3): cos θ, sin θ, 0), as rl-zoo's MaskVelocityWrapper
	// does for PendulumNoVel-v1.
	NoVel bool
}

// Pendulum is Gymnasium's Pendulum-v1: swing a pendulum up and hold it.
//
// State s = [θ, θ̇] (θ = 0 upright; θ is never wrapped in the state). With u
// the action clipped to [−2, 2], g = 10, m = l = 1, dt = 0.05:
//
//	cost  = norm(θ)² + 0.1·θ̇² + 0.001·u²   (from the PRE-step state;
//	                                        norm(θ) = ((θ+π) mod 2π) − π)
//	θ̇′ = clip(θ̇ + (3g/(2l)·sin θ + 3/(m·l²)·u)·dt, −8, 8)
//	θ′ = θ + θ̇′·dt
//
// reward = −cost; never terminates (TimeLimit truncates at 200). Reset draws
// θ uniformly in [−π, π) and θ̇ in [−1, 1). Observation: Box(3) =
// float32([cos θ, sin θ, θ̇]). Action: Box(1) in [−2, 2]; values outside are
// clipped, as in Gymnasium. The action is a float32 widened exactly to
// float64; the arithmetic is float64 throughout (Gymnasium under NumPy 2
// computes the u terms in float32 when given a float32 array; we match its
// float64 semantics).
type Pendulum struct {
	core.Episode
	state [2]float64
	obs   [3]float32
	rng   core.RNG

	maxSpeed, maxTorque, dt, g, m, l float64
	noVel                            bool

	obsSpace, actSpace core.Box
}

// NewPendulum returns a Pendulum; call Reset before Step.
func NewPendulum(cfg PendulumConfig) *Pendulum {
	p := &Pendulum{Episode: core.Episode{Name: "Pendulum"}}
	p.maxSpeed, p.maxTorque, p.dt = 8, 2.0, 0.05
	p.g, p.noVel = cfg.G, cfg.NoVel
	if p.g == 0 {
		p.g = 10.0
	}
	p.m, p.l = 1.0, 1.0
	p.obsSpace = core.Box{Low: []float32{-1, -1, float32(-p.maxSpeed)}, High: []float32{1, 1, float32(p.maxSpeed)}}
	p.actSpace = core.Box{Low: []float32{float32(-p.maxTorque)}, High: []float32{float32(p.maxTorque)}}
	return p
}

func (p *Pendulum) ObservationSpace() core.Space { return p.obsSpace }
func (p *Pendulum) ActionSpace() core.Space      { return p.actSpace }
func (p *Pendulum) Close() error                 { return p.Episode.Close() }

// Reset draws θ in [−π, π) and θ̇ in [−1, 1).
func (p *Pendulum) Reset(seed int64) ([]float32, core.Info, error) {
	if err := p.CheckReset(); err != nil {
		return nil, core.Info{}, err
	}
	p.rng.Reset(seed)
	p.state[0] = uniform(&p.rng, -math.Pi, math.Pi)
	p.state[1] = uniform(&p.rng, -1, 1)
	return p.observe(), core.Info{}, nil
}

func (p *Pendulum) observe() []float32 {
	p.obs[0] = float32(math.Cos(p.state[0]))
	p.obs[1] = float32(math.Sin(p.state[0]))
	p.obs[2] = float32(p.state[1])
	if p.noVel {
		p.obs[2] = 0
	}
	return p.obs[:]
}

// Step applies torque action[0] (clipped to [−2, 2]) for dt.
func (p *Pendulum) Step(action []float32) ([]float32, float64, bool, bool, core.Info, error) {
	if err := p.CheckStep(); err != nil {
		return nil, 0, false, false, core.Info{}, err
	}
	if err := p.actSpace.Check(action); err != nil {
		return nil, 0, false, false, core.Info{}, err
	}
	th, thDot := p.state[0], p.state[1]
	u := min(max(float64(action[0]), -p.maxTorque), p.maxTorque)
	an := AngleNormalize(th)
	costs := an*an + 0.1*(thDot*thDot) + 0.001*(u*u)
	newThDot := thDot + (3*p.g/(2*p.l)*math.Sin(th)+3.0/(p.m*(p.l*p.l))*u)*p.dt
	newThDot = min(max(newThDot, -p.maxSpeed), p.maxSpeed)
	newTh := th + newThDot*p.dt
	p.state = [2]float64{newTh, newThDot}
	return p.observe(), -costs, false, false, core.Info{}, nil
}

// AngleNormalize maps x to [−π, π) as Gymnasium's angle_normalize:
// ((x + π) mod 2π) − π with Python's floored modulo.
func AngleNormalize(x float64) float64 {
	twoPi := 2 * math.Pi
	r := math.Mod(x+math.Pi, twoPi)
	if r != 0 && r < 0 {
		r += twoPi
	}
	return r - math.Pi
}

// StateTo writes [θ, θ̇] into dst.
func (p *Pendulum) StateTo(dst []float64) []float64 {
	dst = resizeState(dst, 2)
	copy(dst, p.state[:])
	return dst
}

// SetState sets [θ, θ̇] and allows Step.
func (p *Pendulum) SetState(s []float64) ([]float32, error) {
	if err := core.CheckState("Pendulum", s, 2); err != nil {
		return nil, err
	}
	if err := p.CheckReset(); err != nil {
		return nil, err
	}
	copy(p.state[:], s)
	return p.observe(), nil
}
