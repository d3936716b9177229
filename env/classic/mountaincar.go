package classic

import (
	"math"

	"herd/env/internal/core"
)

// MountainCarConfig holds the constructor keywords of both mountain cars.
type MountainCarConfig struct {
	// GoalVelocity is the minimum velocity at the goal to terminate;
	// default 0.
	GoalVelocity float64
}

// MountainCar is Gymnasium's MountainCar-v0 (Moore 1990): drive an
// underpowered car up the right hill.
//
// State s = [p, v]. With action a ∈ {0, 1, 2}, force = 0.001, gravity =
// 0.0025:
//
//	v′ = clip(v + (a − 1)·force − cos(3p)·gravity, −0.07, 0.07)
//	p′ = clip(p + v′, −1.2, 0.6);  if p′ = −1.2 and v′ < 0: v′ = 0
//
// (the left wall is inelastic). Terminated when p′ ≥ 0.5 and v′ ≥
// GoalVelocity; reward −1 every step. Reset: p uniform in [−0.6, −0.4), v =
// 0. Observation Box(2) = float32(s); action Discrete(3).
type MountainCar struct {
	core.Episode
	state [2]float64
	obs   [2]float32
	rng   core.RNG

	minPosition, maxPosition, maxSpeed, goalPosition, goalVelocity, force, gravity float64

	obsSpace core.Box
	actSpace core.Discrete
}

// NewMountainCar returns a MountainCar; call Reset before Step.
func NewMountainCar(cfg MountainCarConfig) *MountainCar {
	c := &MountainCar{Episode: core.Episode{Name: "MountainCar"}}
	c.minPosition, c.maxPosition, c.maxSpeed, c.goalPosition = -1.2, 0.6, 0.07, 0.5
	c.goalVelocity = cfg.GoalVelocity
	c.force, c.gravity = 0.001, 0.0025
	c.obsSpace = core.Box{
		Low:  []float32{float32(c.minPosition), float32(-c.maxSpeed)},
		High: []float32{float32(c.maxPosition), float32(c.maxSpeed)},
	}
	c.actSpace = core.Discrete{N: 3}
	return c
}

func (c *MountainCar) ObservationSpace() core.Space { return c.obsSpace }
func (c *MountainCar) ActionSpace() core.Space      { return c.actSpace }
func (c *MountainCar) Close() error                 { return c.Episode.Close() }

// Reset draws p in [−0.6, −0.4) with v = 0.
func (c *MountainCar) Reset(seed int64) ([]float32, core.Info, error) {
	if err := c.CheckReset(); err != nil {
		return nil, core.Info{}, err
	}
	c.rng.Reset(seed)
	c.state = [2]float64{uniform(&c.rng, -0.6, -0.4), 0}
	return c.observe(), core.Info{}, nil
}

func (c *MountainCar) observe() []float32 {
	c.obs[0], c.obs[1] = float32(c.state[0]), float32(c.state[1])
	return c.obs[:]
}

// Step pushes left (0), not at all (1) or right (2).
func (c *MountainCar) Step(action []float32) ([]float32, float64, bool, bool, core.Info, error) {
	if err := c.CheckStep(); err != nil {
		return nil, 0, false, false, core.Info{}, err
	}
	a, err := c.actSpace.Index(action)
	if err != nil {
		return nil, 0, false, false, core.Info{}, err
	}
	position, velocity := c.state[0], c.state[1]
	velocity += float64(a-1)*c.force + math.Cos(3*position)*(-c.gravity)
	velocity = min(max(velocity, -c.maxSpeed), c.maxSpeed)
	position += velocity
	position = min(max(position, c.minPosition), c.maxPosition)
	if position == c.minPosition && velocity < 0 {
		velocity = 0
	}
	term := position >= c.goalPosition && velocity >= c.goalVelocity
	c.state = [2]float64{position, velocity}
	if term {
		c.Running = false
	}
	return c.observe(), -1.0, term, false, core.Info{}, nil
}

// StateTo writes [p, v] into dst.
func (c *MountainCar) StateTo(dst []float64) []float64 {
	dst = resizeState(dst, 2)
	copy(dst, c.state[:])
	return dst
}

// SetState sets [p, v] and allows Step.
func (c *MountainCar) SetState(s []float64) ([]float32, error) {
	if err := core.CheckState("MountainCar", s, 2); err != nil {
		return nil, err
	}
	if err := c.CheckReset(); err != nil {
		return nil, err
	}
	copy(c.state[:], s)
	return c.observe(), nil
}

// MountainCarContinuous is Gymnasium's MountainCarContinuous-v0.
//
// State s = [p, v]. With f = clip(action[0], −1, 1), power = 0.0015:
//
//	v′ = clip(v + f·power − 0.0025·cos(3p), −0.07, 0.07)
//	p′ = clip(p + v′, −1.2, 0.6);  if p′ = −1.2 and v′ < 0: v′ = 0
//
// Terminated when p′ ≥ 0.45 (not 0.5) and v′ ≥ GoalVelocity. Reward =
// 100·[terminated] − 0.1·action[0]², with the UNCLIPPED action. After each
// step the state is rounded to float32 (Gymnasium stores it in a float32
// array); the state set by Reset stays float64. Reset: p uniform in [−0.6,
// −0.4), v = 0. Observation Box(2) (unbounded in Gymnasium's docs, bounded
// [−1.2, 0.6]×[−0.07, 0.07] in its space); action Box(1) in [−1, 1].
type MountainCarContinuous struct {
	core.Episode
	state [2]float64
	obs   [2]float32
	rng   core.RNG

	minAction, maxAction, minPosition, maxPosition, maxSpeed, goalPosition, goalVelocity, power float64

	obsSpace, actSpace core.Box
}

// NewMountainCarContinuous returns a MountainCarContinuous; call Reset
// before Step.
func NewMountainCarContinuous(cfg MountainCarConfig) *MountainCarContinuous {
	c := &MountainCarContinuous{Episode: core.Episode{Name: "MountainCarContinuous"}}
	c.minAction, c.maxAction = -1.0, 1.0
	c.minPosition, c.maxPosition, c.maxSpeed = -1.2, 0.6, 0.07
	c.goalPosition = 0.45
	c.goalVelocity = cfg.GoalVelocity
	c.power = 0.0015
	c.obsSpace = core.Box{
		Low:  []float32{float32(c.minPosition), float32(-c.maxSpeed)},
		High: []float32{float32(c.maxPosition), float32(c.maxSpeed)},
	}
	c.actSpace = core.Box{Low: []float32{float32(c.minAction)}, High: []float32{float32(c.maxAction)}}
	return c
}

func (c *MountainCarContinuous) ObservationSpace() core.Space { return c.obsSpace }
func (c *MountainCarContinuous) ActionSpace() core.Space      { return c.actSpace }
func (c *MountainCarContinuous) Close() error                 { return c.Episode.Close() }

// Reset draws p in [−0.6, −0.4) with v = 0.
func (c *MountainCarContinuous) Reset(seed int64) ([]float32, core.Info, error) {
	if err := c.CheckReset(); err != nil {
		return nil, core.Info{}, err
	}
	c.rng.Reset(seed)
	c.state = [2]float64{uniform(&c.rng, -0.6, -0.4), 0}
	return c.observe(), core.Info{}, nil
}

func (c *MountainCarContinuous) observe() []float32 {
	c.obs[0], c.obs[1] = float32(c.state[0]), float32(c.state[1])
	return c.obs[:]
}

// Step applies force action[0] (clipped to [−1, 1]).
func (c *MountainCarContinuous) Step(action []float32) ([]float32, float64, bool, bool, core.Info, error) {
	if err := c.CheckStep(); err != nil {
		return nil, 0, false, false, core.Info{}, err
	}
	if err := c.actSpace.Check(action); err != nil {
		return nil, 0, false, false, core.Info{}, err
	}
	a := float64(action[0])
	position, velocity := c.state[0], c.state[1]
	force := min(max(a, c.minAction), c.maxAction)
	velocity += force*c.power - 0.0025*math.Cos(3*position)
	if velocity > c.maxSpeed {
		velocity = c.maxSpeed
	}
	if velocity < -c.maxSpeed {
		velocity = -c.maxSpeed
	}
	position += velocity
	if position > c.maxPosition {
		position = c.maxPosition
	}
	if position < c.minPosition {
		position = c.minPosition
	}
	if position == c.minPosition && velocity < 0 {
		velocity = 0
	}
	term := position >= c.goalPosition && velocity >= c.goalVelocity
	reward := 0.0
	if term {
		reward = 100.0
	}
	reward -= a * a * 0.1 // a is a widened float32, so a·a is exact, as pow(a, 2) is
	c.state = [2]float64{float64(float32(position)), float64(float32(velocity))}
	if term {
		c.Running = false
	}
	return c.observe(), reward, term, false, core.Info{}, nil
}

// StateTo writes [p, v] into dst.
func (c *MountainCarContinuous) StateTo(dst []float64) []float64 {
	dst = resizeState(dst, 2)
	copy(dst, c.state[:])
	return dst
}

// SetState sets [p, v] (kept in float64 until the next step rounds it) and
// allows Step.
func (c *MountainCarContinuous) SetState(s []float64) ([]float32, error) {
	if err := core.CheckState("MountainCarContinuous", s, 2); err != nil {
		return nil, err
	}
	if err := c.CheckReset(); err != nil {
		return nil, err
	}
	copy(c.state[:], s)
	return c.observe(), nil
}
