package classic

import (
	"fmt"
	"math"

	"herd/env/internal/core"
)

// AcrobotConfig holds Acrobot's constructor keywords.
type AcrobotConfig struct {
	// BookOrNips picks the dynamics: "book" (default, Sutton & Barto) or
	// "nips" (Sutton 1996, which lacks the −m₂·l₁·l_c2·θ̇₁²·sin θ₂ term in
	// θ̈₂).
	BookOrNips string
}

// Acrobot is Gymnasium's Acrobot-v1 (Sutton 1996; Sutton & Barto): swing
// the tip of a two-link chain above the bar by torquing the middle joint.
//
// State s = [θ₁, θ₂, θ̇₁, θ̇₂] (θ₂ relative to link 1). A step holds the torque
// τ = [−1, 0, +1][action] as a fifth state value and takes ONE classical
// Runge–Kutta (RK4) step of dt = 0.2 s of the equations of motion (m₁ = m₂ =
// 1, l₁ = 1, l_c1 = l_c2 = 0.5, I₁ = I₂ = 1, g = 9.8):
//
//	d₁ = m₁l_c1² + m₂(l₁² + l_c2² + 2l₁l_c2 cos θ₂) + I₁ + I₂
//	d₂ = m₂(l_c2² + l₁l_c2 cos θ₂) + I₂
//	φ₂ = m₂l_c2 g cos(θ₁ + θ₂ − π/2)
//	φ₁ = −m₂l₁l_c2 θ̇₂² sin θ₂ − 2m₂l₁l_c2 θ̇₂θ̇₁ sin θ₂ + (m₁l_c1 + m₂l₁)g cos(θ₁ − π/2) + φ₂
//	θ̈₂ = (τ + d₂/d₁·φ₁ − m₂l₁l_c2 θ̇₁² sin θ₂ − φ₂) / (m₂l_c2² + I₂ − d₂²/d₁)   [book]
//	θ̈₂ = (τ + d₂/d₁·φ₁ − φ₂) / (m₂l_c2² + I₂ − d₂²/d₁)                        [nips]
//	θ̈₁ = −(d₂θ̈₂ + φ₁)/d₁
//
// then wraps θ₁, θ₂ into [−π, π] (by repeated ±2π) and clips θ̇₁ to ±4π and
// θ̇₂ to ±9π. Terminated when −cos θ₁ − cos(θ₁ + θ₂) > 1; reward −1, or 0
// on the terminating step. Reset draws all four values uniformly in [−0.1,
// 0.1) and rounds them to float32 (Gymnasium stores the reset state as
// float32; later states are float64). Observation Box(6) = float32([cos θ₁,
// sin θ₁, cos θ₂, sin θ₂, θ̇₁, θ̇₂]); action Discrete(3).
type Acrobot struct {
	core.Episode
	nips  bool
	state [4]float64
	obs   [6]float32
	rng   core.RNG

	dt, l1, m1, m2, lc1, lc2, i1, i2, g float64
	maxVel1, maxVel2                    float64
	torques                             [3]float64

	obsSpace core.Box
	actSpace core.Discrete
}

// NewAcrobot returns an Acrobot; call Reset before Step.
func NewAcrobot(cfg AcrobotConfig) (*Acrobot, error) {
	a := &Acrobot{Episode: core.Episode{Name: "Acrobot"}}
	switch cfg.BookOrNips {
	case "", "book":
	case "nips":
		a.nips = true
	default:
		return nil, fmt.Errorf("%w: Acrobot book_or_nips %q, want \"book\" or \"nips\"", core.ErrInvalidOption, cfg.BookOrNips)
	}
	a.dt = 0.2
	a.l1, a.m1, a.m2, a.lc1, a.lc2, a.i1, a.i2, a.g = 1.0, 1.0, 1.0, 0.5, 0.5, 1.0, 1.0, 9.8
	four, nine := 4.0, 9.0
	a.maxVel1, a.maxVel2 = four*math.Pi, nine*math.Pi
	a.torques = [3]float64{-1.0, 0.0, 1.0}
	hi := []float32{1, 1, 1, 1, float32(a.maxVel1), float32(a.maxVel2)}
	lo := make([]float32, 6)
	for i, v := range hi {
		lo[i] = -v
	}
	a.obsSpace = core.Box{Low: lo, High: hi}
	a.actSpace = core.Discrete{N: 3}
	return a, nil
}

func (a *Acrobot) ObservationSpace() core.Space { return a.obsSpace }
func (a *Acrobot) ActionSpace() core.Space      { return a.actSpace }
func (a *Acrobot) Close() error                 { return a.Episode.Close() }

// Reset draws the four state values in [−0.1, 0.1), rounded to float32.
func (a *Acrobot) Reset(seed int64) ([]float32, core.Info, error) {
	if err := a.CheckReset(); err != nil {
		return nil, core.Info{}, err
	}
	a.rng.Reset(seed)
	for i := range a.state {
		a.state[i] = float64(float32(uniform(&a.rng, -0.1, 0.1)))
	}
	return a.observe(), core.Info{}, nil
}

func (a *Acrobot) observe() []float32 {
	s := &a.state
	a.obs = [6]float32{
		float32(math.Cos(s[0])), float32(math.Sin(s[0])),
		float32(math.Cos(s[1])), float32(math.Sin(s[1])),
		float32(s[2]), float32(s[3]),
	}
	return a.obs[:]
}

// Step applies torque −1 (0), 0 (1) or +1 (2) for 0.2 s.
func (a *Acrobot) Step(action []float32) ([]float32, float64, bool, bool, core.Info, error) {
	if err := a.CheckStep(); err != nil {
		return nil, 0, false, false, core.Info{}, err
	}
	k, err := a.actSpace.Index(action)
	if err != nil {
		return nil, 0, false, false, core.Info{}, err
	}
	ns := a.rk4(a.state, a.torques[k])
	ns[0] = wrap(ns[0], -math.Pi, math.Pi)
	ns[1] = wrap(ns[1], -math.Pi, math.Pi)
	ns[2] = min(max(ns[2], -a.maxVel1), a.maxVel1)
	ns[3] = min(max(ns[3], -a.maxVel2), a.maxVel2)
	a.state = ns
	term := -math.Cos(ns[0])-math.Cos(ns[1]+ns[0]) > 1.0
	reward := -1.0
	if term {
		reward = 0.0
		a.Running = false
	}
	return a.observe(), reward, term, false, core.Info{}, nil
}

// rk4 is one classical Runge–Kutta step of length dt from s with the torque
// held constant (its derivative is 0, so it stays τ through the stages):
// y₁ = y₀ + dt/6·(k₁ + 2k₂ + 2k₃ + k₄), evaluated in Gymnasium's order.
func (a *Acrobot) rk4(s [4]float64, tau float64) [4]float64 {
	dt := a.dt - 0 // t = [0, dt]
	dt2 := dt / 2.0
	k1 := a.dsdt(s, tau)
	var y [4]float64
	for i := range y {
		y[i] = s[i] + dt2*k1[i]
	}
	k2 := a.dsdt(y, tau)
	for i := range y {
		y[i] = s[i] + dt2*k2[i]
	}
	k3 := a.dsdt(y, tau)
	for i := range y {
		y[i] = s[i] + dt*k3[i]
	}
	k4 := a.dsdt(y, tau)
	var out [4]float64
	for i := range out {
		out[i] = s[i] + dt/6.0*(k1[i]+2*k2[i]+2*k3[i]+k4[i])
	}
	return out
}

// dsdt is the equations of motion (see Acrobot).
func (a *Acrobot) dsdt(s [4]float64, tau float64) [4]float64 {
	m1, m2, l1, lc1, lc2, i1, i2, g := a.m1, a.m2, a.l1, a.lc1, a.lc2, a.i1, a.i2, a.g
	theta1, theta2, dtheta1, dtheta2 := s[0], s[1], s[2], s[3]
	cos2, sin2 := math.Cos(theta2), math.Sin(theta2)
	d1 := m1*(lc1*lc1) + m2*((l1*l1)+(lc2*lc2)+2*l1*lc2*cos2) + i1 + i2
	d2 := m2*((lc2*lc2)+l1*lc2*cos2) + i2
	phi2 := m2 * lc2 * g * math.Cos(theta1+theta2-math.Pi/2.0)
	phi1 := -m2*l1*lc2*(dtheta2*dtheta2)*sin2 -
		2*m2*l1*lc2*dtheta2*dtheta1*sin2 +
		(m1*lc1+m2*l1)*g*math.Cos(theta1-math.Pi/2) + phi2
	var ddtheta2 float64
	if a.nips {
		ddtheta2 = (tau + d2/d1*phi1 - phi2) / (m2*(lc2*lc2) + i2 - (d2*d2)/d1)
	} else {
		ddtheta2 = (tau + d2/d1*phi1 - m2*l1*lc2*(dtheta1*dtheta1)*sin2 - phi2) /
			(m2*(lc2*lc2) + i2 - (d2*d2)/d1)
	}
	ddtheta1 := -(d2*ddtheta2 + phi1) / d1
	return [4]float64{dtheta1, dtheta2, ddtheta1, ddtheta2}
}

// wrap maps x into [lo, hi] by adding or subtracting hi − lo, as
// Gymnasium's wrap (a loop, so exactly its rounding).
func wrap(x, lo, hi float64) float64 {
	diff := hi - lo
	for x > hi {
		x -= diff
	}
	for x < lo {
		x += diff
	}
	return x
}

// StateTo writes [θ₁, θ₂, θ̇₁, θ̇₂] into dst.
func (a *Acrobot) StateTo(dst []float64) []float64 {
	dst = resizeState(dst, 4)
	copy(dst, a.state[:])
	return dst
}

// SetState sets [θ₁, θ₂, θ̇₁, θ̇₂] and allows Step.
func (a *Acrobot) SetState(s []float64) ([]float32, error) {
	if err := core.CheckState("Acrobot", s, 4); err != nil {
		return nil, err
	}
	if err := a.CheckReset(); err != nil {
		return nil, err
	}
	copy(a.state[:], s)
	return a.observe(), nil
}
