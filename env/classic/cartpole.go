package classic

import (
	"math"

	"herd/env/internal/core"
)

// CartPoleConfig holds CartPole's constructor keywords.
type CartPoleConfig struct {
	// SuttonBartoReward gives 0 per step and −1 on termination instead of
	// +1 per step (Gymnasium's sutton_barto_reward). Default false.
	SuttonBartoReward bool
	// NoVel zeroes the velocities ẋ and θ̇ in every observation (the
	// shape stays Box(4)), as rl-zoo's MaskVelocityWrapper does for
	// CartPoleNoVel-v1: a partially observed task, where a policy needs
	// memory to infer the velocities. The dynamics are unchanged.
	NoVel bool
}

// CartPole is Gymnasium's CartPole-v1 (Barto, Sutton & Anderson 1983): push
// a cart left or right to keep a pole upright.
//
// State s = [x, ẋ, θ, θ̇] (float64). With F = ±10 N (action 1 pushes right,
// 0 left), g = 9.8, m_c = 1.0, m_p = 0.1, M = m_c + m_p, l = 0.5 (HALF the
// pole length), τ = 0.02 s:
//
//	temp = (F + m_p·l·θ̇²·sin θ) / M
//	θ̈ = (g·sin θ − cos θ·temp) / (l·(4/3 − m_p·cos²θ / M))
//	ẍ = temp − m_p·l·θ̈·cos θ / M
//
// then EXPLICIT Euler: x ← x + τ·ẋ, ẋ ← ẋ + τ·ẍ, θ ← θ + τ·θ̇, θ̇ ← θ̇ + τ·θ̈
// (positions advance with the old velocities). Terminated when |x| > 2.4 or
// |θ| > 12·2π/360; reward +1 on every step including the terminating one.
// Reset draws each state value uniformly in [−0.05, 0.05).
//
// Observation: Box(4) = float32(s). Action: Discrete(2). No allocation per
// step.
type CartPole struct {
	core.Episode
	cfg   CartPoleConfig
	state [4]float64
	obs   [4]float32
	rng   core.RNG

	gravity, massCart, massPole, totalMass, length, poleMassLength, forceMag, tau float64
	thetaThreshold, xThreshold                                                    float64

	obsSpace core.Box
	actSpace core.Discrete
}

// NewCartPole returns a CartPole; call Reset before Step.
func NewCartPole(cfg CartPoleConfig) *CartPole {
	c := &CartPole{Episode: core.Episode{Name: "CartPole"}, cfg: cfg}
	// Computed at run time in Python's order so that every constant is the
	// same float64 Gymnasium uses (Go would fold constant expressions
	// exactly, which can differ in the last bit).
	c.gravity, c.massCart, c.massPole = 9.8, 1.0, 0.1
	c.totalMass = c.massPole + c.massCart
	c.length = 0.5
	c.poleMassLength = c.massPole * c.length
	c.forceMag, c.tau = 10.0, 0.02
	twelve := 12.0
	c.thetaThreshold = twelve * 2 * math.Pi / 360
	c.xThreshold = 2.4
	maxF := float32(math.MaxFloat32)
	c.obsSpace = core.Box{
		Low:  []float32{float32(-c.xThreshold * 2), -maxF, float32(-c.thetaThreshold * 2), -maxF},
		High: []float32{float32(c.xThreshold * 2), maxF, float32(c.thetaThreshold * 2), maxF},
	}
	c.actSpace = core.Discrete{N: 2}
	return c
}

func (c *CartPole) ObservationSpace() core.Space { return c.obsSpace }
func (c *CartPole) ActionSpace() core.Space      { return c.actSpace }
func (c *CartPole) Close() error                 { return c.Episode.Close() }

// Reset draws a new start state.
func (c *CartPole) Reset(seed int64) ([]float32, core.Info, error) {
	if err := c.CheckReset(); err != nil {
		return nil, core.Info{}, err
	}
	c.rng.Reset(seed)
	for i := range c.state {
		c.state[i] = uniform(&c.rng, -0.05, 0.05)
	}
	return c.observe(), core.Info{}, nil
}

func (c *CartPole) observe() []float32 {
	for i, v := range c.state {
		c.obs[i] = float32(v)
	}
	if c.cfg.NoVel {
		c.obs[1], c.obs[3] = 0, 0
	}
	return c.obs[:]
}

// Step applies the force of action 0 (left) or 1 (right) for τ seconds.
func (c *CartPole) Step(action []float32) ([]float32, float64, bool, bool, core.Info, error) {
	if err := c.CheckStep(); err != nil {
		return nil, 0, false, false, core.Info{}, err
	}
	a, err := c.actSpace.Index(action)
	if err != nil {
		return nil, 0, false, false, core.Info{}, err
	}
	term := c.advance(a)
	reward := 1.0
	if c.cfg.SuttonBartoReward {
		reward = 0
		if term {
			reward = -1
		}
	}
	if term {
		c.Running = false
	}
	return c.observe(), reward, term, false, core.Info{}, nil
}

// advance is the dynamics; it reports termination.
func (c *CartPole) advance(a int) bool {
	x, xDot, theta, thetaDot := c.state[0], c.state[1], c.state[2], c.state[3]
	force := -c.forceMag
	if a == 1 {
		force = c.forceMag
	}
	cosTheta, sinTheta := math.Cos(theta), math.Sin(theta)
	temp := (force + c.poleMassLength*(thetaDot*thetaDot)*sinTheta) / c.totalMass
	thetaAcc := (c.gravity*sinTheta - cosTheta*temp) /
		(c.length * (4.0/3.0 - c.massPole*(cosTheta*cosTheta)/c.totalMass))
	xAcc := temp - c.poleMassLength*thetaAcc*cosTheta/c.totalMass
	x = x + c.tau*xDot
	xDot = xDot + c.tau*xAcc
	theta = theta + c.tau*thetaDot
	thetaDot = thetaDot + c.tau*thetaAcc
	c.state = [4]float64{x, xDot, theta, thetaDot}
	return x < -c.xThreshold || x > c.xThreshold || theta < -c.thetaThreshold || theta > c.thetaThreshold
}

// StateTo writes [x, ẋ, θ, θ̇] into dst.
func (c *CartPole) StateTo(dst []float64) []float64 {
	dst = resizeState(dst, 4)
	copy(dst, c.state[:])
	return dst
}

// SetState sets [x, ẋ, θ, θ̇] and allows Step.
func (c *CartPole) SetState(s []float64) ([]float32, error) {
	if err := core.CheckState("CartPole", s, 4); err != nil {
		return nil, err
	}
	if err := c.CheckReset(); err != nil {
		return nil, err
	}
	copy(c.state[:], s)
	return c.observe(), nil
}
