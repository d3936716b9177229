package box2d

import (
	"fmt"
	"math"

	b2 "github.com/ByteArena/box2d"

	"herd/env/internal/core"
	"herd/internal/scratch"
)

// Constants of Gymnasium's lunar_lander.py.
const (
	fps              = 50
	scale            = 30.0 // pixels per metre; forces are tuned to it
	mainEnginePower  = 13.0
	sideEnginePower  = 0.6
	initialRandom    = 1000.0
	legAway          = 20
	legDown          = 18
	legW, legH       = 2, 8
	legSpringTorque  = 40
	sideEngineHeight = 14.0
	sideEngineAway   = 12.0
	mainEngineYLoc   = 4.0
	viewportW        = 600
	viewportH        = 400
	chunks           = 11

	// Collision categories (Box2D filter bits), as in Gymnasium: the ground
	// collides with everything; the lander and legs only with the ground.
	catGround = 0x0001
	catLander = 0x0010
	catLeg    = 0x0020
)

var landerPoly = [6][2]float64{{-14, 17}, {-17, 0}, {-17, -10}, {17, -10}, {17, 0}, {14, 17}}

// LunarLanderConfig holds LunarLander's constructor keywords (Gymnasium's
// names in brackets). Build one with DefaultLunarLanderConfig and change
// fields: the zero value is not Gymnasium's default (gravity 0 is invalid).
type LunarLanderConfig struct {
	// Continuous selects Box(2) actions [main, lateral] in [−1, 1] instead
	// of Discrete(4) [continuous].
	Continuous bool
	// Gravity in m/s², in (−12, 0) [gravity, default −10].
	Gravity float64
	// EnableWind turns on wind and turbulence [enable_wind, default false].
	EnableWind bool
	// WindPower is the wind's maximum force [wind_power, default 15;
	// Gymnasium recommends 0–20].
	WindPower float64
	// TurbulencePower is the maximum turbulence torque [turbulence_power,
	// default 1.5; recommended 0–2].
	TurbulencePower float64
}

// DefaultLunarLanderConfig is Gymnasium's default LunarLander-v3.
func DefaultLunarLanderConfig() LunarLanderConfig {
	return LunarLanderConfig{Gravity: -10, WindPower: 15, TurbulencePower: 1.5}
}

// LunarLander is Gymnasium's LunarLander-v3 (Oleg Klimov's rocket landing
// task) on the pure-Go Box2D port github.com/ByteArena/box2d.
//
// Observation (8, float32): x and y relative to the pad centre, scaled so
// the viewport spans about ±1; x and y velocity; angle; angular velocity
// (×20/FPS); left and right leg ground contact (0 or 1). Actions, discrete:
// 0 nothing, 1 left orientation engine, 2 main engine, 3 right orientation
// engine; continuous Box(2): main throttle (off below 0, 50–100% on [0, 1])
// and lateral throttle (off in (−0.5, 0.5), left below, right above).
//
// Reward: the change in shaping −100·‖(x, y)‖ − 100·‖(vx, vy)‖ − 100·|angle|
// + 10 per leg in contact, minus 0.3 per frame of main engine (×throttle) and
// 0.03 per frame of side engine; −100 and terminated on a crash (the body
// touches the ground) or |x| ≥ 1; +100 and terminated when the lander comes
// to rest (Box2D puts it to sleep). Gymnasium's TimeLimit is 1000 steps.
//
// Each Reset builds a fresh world (Gymnasium v3 does too): terrain of 11
// chunks with random heights and a flat pad in the middle, the lander at the
// top centre pushed by a random force, legs on spring-loaded revolute joints;
// Reset then takes one no-op step, as Gymnasium's reset does. With wind, the
// wind and turbulence phases are drawn at Reset and the force is
// tanh(sin(0.02k) + sin(0.01πk))·power at step k while no leg touches.
//
// Differences from Python: Box2D runs in float64 here (pybox2d is float32),
// so trajectories match Gymnasium in behaviour, not bit for bit; exhaust
// particles are left out (they never touch the lander, so the dynamics do
// not change, and Gymnasium only ages them while rendering); there is no
// rendering. The Box2D port allocates inside World.Step, so unlike the
// classic envs a step is not allocation-free.
type LunarLander struct {
	cfg    LunarLanderConfig
	rng    core.RNG
	world  *b2.B2World
	lander *b2.B2Body
	legs   [2]*b2.B2Body
	ground *b2.B2Body
	// contact state written by the contact listener during World.Step.
	gameOver    bool
	legContact  [2]bool
	helipadY    float64
	prevShaping float64
	lastReward  float64 // for tests: the reward of the last step
	hasPrev     bool
	windIdx     int
	torqueIdx   int
	running     bool
	closed      bool
	obs         [8]float32
	obsSpace    core.Box
	discrete    core.Discrete
	box         core.Box
}

// NewLunarLander returns a LunarLander; call Reset before Step.
func NewLunarLander(cfg LunarLanderConfig) (*LunarLander, error) {
	if !(cfg.Gravity > -12 && cfg.Gravity < 0) {
		return nil, fmt.Errorf("%w: LunarLander gravity %v, want in (−12, 0)", core.ErrInvalidOption, cfg.Gravity)
	}
	if math.IsNaN(cfg.WindPower) || math.IsInf(cfg.WindPower, 0) || math.IsNaN(cfg.TurbulencePower) || math.IsInf(cfg.TurbulencePower, 0) {
		return nil, fmt.Errorf("%w: LunarLander wind %v, turbulence %v", core.ErrInvalidOption, cfg.WindPower, cfg.TurbulencePower)
	}
	initBox2D()
	l := &LunarLander{cfg: cfg}
	twoPi := float32(2 * math.Pi)
	l.obsSpace = core.Box{
		Low:  []float32{-2.5, -2.5, -10, -10, -twoPi, -10, 0, 0},
		High: []float32{2.5, 2.5, 10, 10, twoPi, 10, 1, 1},
	}
	l.discrete = core.Discrete{N: 4}
	l.box = core.UniformBox(-1, 1, 2)
	return l, nil
}

func (l *LunarLander) ObservationSpace() core.Space { return l.obsSpace }

func (l *LunarLander) ActionSpace() core.Space {
	if l.cfg.Continuous {
		return l.box
	}
	return l.discrete
}

// Close drops the world; further calls return ErrClosed.
func (l *LunarLander) Close() error {
	l.closed, l.running = true, false
	l.world, l.lander, l.ground, l.legs = nil, nil, nil, [2]*b2.B2Body{}
	return nil
}

// contactListener is Gymnasium's ContactDetector.
type contactListener struct{ l *LunarLander }

func (c contactListener) BeginContact(contact b2.B2ContactInterface) {
	a, b := contact.GetFixtureA().GetBody(), contact.GetFixtureB().GetBody()
	if a == c.l.lander || b == c.l.lander {
		c.l.gameOver = true
	}
	for i, leg := range c.l.legs {
		if a == leg || b == leg {
			c.l.legContact[i] = true
		}
	}
}

func (c contactListener) EndContact(contact b2.B2ContactInterface) {
	a, b := contact.GetFixtureA().GetBody(), contact.GetFixtureB().GetBody()
	for i, leg := range c.l.legs {
		if a == leg || b == leg {
			c.l.legContact[i] = false
		}
	}
}

func (contactListener) PreSolve(b2.B2ContactInterface, b2.B2Manifold)         {}
func (contactListener) PostSolve(b2.B2ContactInterface, *b2.B2ContactImpulse) {}

func (l *LunarLander) uniform(lo, hi float64) float64 {
	return lo + (hi-lo)*l.rng.Rand().Float64()
}

// Reset builds a new world and takes Gymnasium's initial no-op step.
func (l *LunarLander) Reset(seed int64) ([]float32, core.Info, error) {
	if l.closed {
		return nil, core.Info{}, fmt.Errorf("%w: LunarLander.Reset", core.ErrClosed)
	}
	l.rng.Reset(seed)
	box2dLock()
	defer box2dUnlock()
	world := new(b2.B2World) // Box2D bodies keep a pointer to their world: never copy it
	*world = b2.MakeB2World(b2.MakeB2Vec2(0, l.cfg.Gravity))
	l.world = world
	world.SetContactListener(contactListener{l})
	l.gameOver, l.legContact, l.hasPrev = false, [2]bool{}, false

	w, h := float64(viewportW)/scale, float64(viewportH)/scale

	// Terrain.
	var height [chunks + 1]float64
	for i := range height {
		height[i] = l.uniform(0, h/2)
	}
	var chunkX [chunks]float64
	for i := range chunkX {
		chunkX[i] = w / (chunks - 1) * float64(i)
	}
	l.helipadY = h / 4
	for i := chunks/2 - 2; i <= chunks/2+2; i++ {
		height[i] = l.helipadY
	}
	var smoothY [chunks]float64
	for i := range smoothY {
		prev := height[(i-1+len(height))%len(height)] // Python's height[-1] is the last
		smoothY[i] = 0.33 * (prev + height[i] + height[i+1])
	}
	gd := b2.MakeB2BodyDef()
	l.ground = world.CreateBody(&gd)
	groundFilter := b2.B2Filter{CategoryBits: catGround, MaskBits: 0xFFFF}
	edge := b2.MakeB2EdgeShape()
	edge.Set(b2.MakeB2Vec2(0, 0), b2.MakeB2Vec2(w, 0))
	fd := b2.MakeB2FixtureDef()
	fd.Shape, fd.Filter = &edge, groundFilter // friction 0.2, pybox2d's default
	l.ground.CreateFixtureFromDef(&fd)
	for i := 0; i < chunks-1; i++ {
		e := b2.MakeB2EdgeShape()
		e.Set(b2.MakeB2Vec2(chunkX[i], smoothY[i]), b2.MakeB2Vec2(chunkX[i+1], smoothY[i+1]))
		fd := b2.MakeB2FixtureDef()
		fd.Shape, fd.Density, fd.Friction, fd.Filter = &e, 0, 0.1, groundFilter
		l.ground.CreateFixtureFromDef(&fd)
	}

	// Lander.
	initialX, initialY := w/2, h
	ld := b2.MakeB2BodyDef()
	ld.Type = b2.B2BodyType.B2_dynamicBody
	ld.Position = b2.MakeB2Vec2(initialX, initialY)
	l.lander = world.CreateBody(&ld)
	var verts [6]b2.B2Vec2
	for i, p := range landerPoly {
		verts[i] = b2.MakeB2Vec2(p[0]/scale, p[1]/scale)
	}
	poly := b2.MakeB2PolygonShape()
	poly.Set(verts[:], len(verts))
	fd = b2.MakeB2FixtureDef()
	fd.Shape, fd.Density, fd.Friction, fd.Restitution = &poly, 5.0, 0.1, 0
	fd.Filter = b2.B2Filter{CategoryBits: catLander, MaskBits: catGround}
	l.lander.CreateFixtureFromDef(&fd)
	fx, fy := l.uniform(-initialRandom, initialRandom), l.uniform(-initialRandom, initialRandom)
	l.lander.ApplyForceToCenter(b2.MakeB2Vec2(fx, fy), true)

	if l.cfg.EnableWind {
		l.windIdx = l.rng.Rand().IntN(19998) - 9999 // integers(−9999, 9999)
		l.torqueIdx = l.rng.Rand().IntN(19998) - 9999
	}

	// Legs on spring-loaded revolute joints.
	for k, i := range [2]float64{-1, +1} {
		bd := b2.MakeB2BodyDef()
		bd.Type = b2.B2BodyType.B2_dynamicBody
		bd.Position = b2.MakeB2Vec2(initialX-i*legAway/scale, initialY)
		bd.Angle = i * 0.05
		leg := world.CreateBody(&bd)
		box := b2.MakeB2PolygonShape()
		box.SetAsBox(legW/scale, legH/scale)
		fd := b2.MakeB2FixtureDef()
		fd.Shape, fd.Density, fd.Restitution = &box, 1.0, 0
		fd.Filter = b2.B2Filter{CategoryBits: catLeg, MaskBits: catGround}
		leg.CreateFixtureFromDef(&fd)
		rjd := b2.MakeB2RevoluteJointDef()
		rjd.BodyA, rjd.BodyB = l.lander, leg
		rjd.LocalAnchorA = b2.MakeB2Vec2(0, 0)
		rjd.LocalAnchorB = b2.MakeB2Vec2(i*legAway/scale, legDown/scale)
		rjd.EnableMotor, rjd.EnableLimit = true, true
		rjd.MaxMotorTorque = legSpringTorque
		rjd.MotorSpeed = 0.3 * i
		if i == -1 {
			rjd.LowerAngle, rjd.UpperAngle = 0.9-0.5, 0.9
		} else {
			rjd.LowerAngle, rjd.UpperAngle = -0.9, -0.9+0.5
		}
		world.CreateJoint(&rjd)
		l.legs[k] = leg
	}

	l.running = true
	obs, _, _, err := l.stepLocked(0, 0, 0)
	if err != nil {
		return nil, core.Info{}, err
	}
	return obs, core.Info{}, nil
}

// Step fires the engines chosen by action and advances 1/50 s.
func (l *LunarLander) Step(action []float32) ([]float32, float64, bool, bool, core.Info, error) {
	if l.closed {
		return nil, 0, false, false, core.Info{}, fmt.Errorf("%w: LunarLander.Step", core.ErrClosed)
	}
	if !l.running {
		return nil, 0, false, false, core.Info{}, fmt.Errorf("%w: LunarLander.Step before Reset or after the episode terminated", core.ErrNeedsReset)
	}
	var mainT, sideT, dir float64 // throttles in [0.5, 1] or 0; side direction ±1
	if l.cfg.Continuous {
		if err := l.box.Check(action); err != nil {
			return nil, 0, false, false, core.Info{}, err
		}
		a0 := min(max(float64(action[0]), -1), 1)
		a1 := min(max(float64(action[1]), -1), 1)
		if a0 > 0 {
			mainT = (min(max(a0, 0), 1) + 1) * 0.5
		}
		if math.Abs(a1) > 0.5 {
			dir = math.Copysign(1, a1)
			sideT = min(max(math.Abs(a1), 0.5), 1)
		}
	} else {
		a, err := l.discrete.Index(action)
		if err != nil {
			return nil, 0, false, false, core.Info{}, err
		}
		switch a {
		case 2:
			mainT = 1
		case 1, 3:
			dir, sideT = float64(a-2), 1
		}
	}
	box2dLock()
	obs, reward, term, err := l.stepLocked(mainT, sideT, dir)
	box2dUnlock()
	if err != nil {
		return nil, 0, false, false, core.Info{}, err
	}
	if term {
		l.running = false
	}
	return obs, reward, term, false, core.Info{}, nil
}

// windMag is Gymnasium's never-periodic wind profile.
func windMag(k int, power float64) float64 {
	x := float64(k)
	return math.Tanh(math.Sin(0.02*x)+math.Sin(math.Pi*0.01*x)) * power
}

// stepLocked applies wind and engine impulses, steps the world and computes
// observation, reward and termination (Gymnasium's step after action
// decoding). The caller holds box2dLock.
func (l *LunarLander) stepLocked(mainT, sideT, dir float64) ([]float32, float64, bool, error) {
	if l.cfg.EnableWind && !(l.legContact[0] || l.legContact[1]) {
		l.lander.ApplyForceToCenter(b2.MakeB2Vec2(windMag(l.windIdx, l.cfg.WindPower), 0), true)
		l.windIdx++
		l.lander.ApplyTorque(windMag(l.torqueIdx, l.cfg.TurbulencePower), true)
		l.torqueIdx++
	}
	angle := l.lander.GetAngle()
	tip := [2]float64{math.Sin(angle), math.Cos(angle)}
	side := [2]float64{-tip[1], tip[0]}
	disp := [2]float64{l.uniform(-1, 1) / scale, l.uniform(-1, 1) / scale}
	pos := l.lander.GetPosition()
	if mainT > 0 {
		ox := tip[0]*(mainEngineYLoc/scale+2*disp[0]) + side[0]*disp[1]
		oy := -tip[1]*(mainEngineYLoc/scale+2*disp[0]) - side[1]*disp[1]
		at := b2.MakeB2Vec2(pos.X+ox, pos.Y+oy)
		l.lander.ApplyLinearImpulse(b2.MakeB2Vec2(-ox*mainEnginePower*mainT, -oy*mainEnginePower*mainT), at, true)
	}
	if sideT > 0 {
		ox := tip[0]*disp[0] + side[0]*(3*disp[1]+dir*sideEngineAway/scale)
		oy := -tip[1]*disp[0] - side[1]*(3*disp[1]+dir*sideEngineAway/scale)
		// Gymnasium uses 17 (not SIDE_ENGINE_HEIGHT = 14) for the x offset.
		at := b2.MakeB2Vec2(pos.X+ox-tip[0]*17/scale, pos.Y+oy+tip[1]*sideEngineHeight/scale)
		l.lander.ApplyLinearImpulse(b2.MakeB2Vec2(-ox*sideEnginePower*sideT, -oy*sideEnginePower*sideT), at, true)
	}

	l.world.Step(1.0/fps, 6*30, 2*30)

	pos = l.lander.GetPosition()
	vel := l.lander.GetLinearVelocity()
	halfW, halfH := float64(viewportW)/scale/2, float64(viewportH)/scale/2
	var s [8]float64
	s[0] = (pos.X - halfW) / halfW
	s[1] = (pos.Y - (l.helipadY + legDown/scale)) / halfH
	s[2] = vel.X * halfW / fps
	s[3] = vel.Y * halfH / fps
	s[4] = l.lander.GetAngle()
	s[5] = 20.0 * l.lander.GetAngularVelocity() / fps
	if l.legContact[0] {
		s[6] = 1
	}
	if l.legContact[1] {
		s[7] = 1
	}
	for i, v := range s {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, 0, false, fmt.Errorf("%w: LunarLander physics produced %v in observation %d", core.ErrInvalidState, v, i)
		}
		l.obs[i] = float32(v)
	}

	shaping := -100*math.Sqrt(s[0]*s[0]+s[1]*s[1]) - 100*math.Sqrt(s[2]*s[2]+s[3]*s[3]) -
		100*math.Abs(s[4]) + 10*s[6] + 10*s[7]
	reward := 0.0
	if l.hasPrev {
		reward = shaping - l.prevShaping
	}
	l.prevShaping, l.hasPrev = shaping, true
	reward -= mainT * 0.30
	reward -= sideT * 0.03

	term := false
	if l.gameOver || math.Abs(s[0]) >= 1.0 {
		term, reward = true, -100
	}
	if !l.lander.IsAwake() {
		term, reward = true, +100
	}
	l.lastReward = reward
	return l.obs[:], reward, term, nil
}

// Heuristic is Gymnasium's hand-written controller (lunar_lander.heuristic)
// for observation s; it writes the action into dst (1 value for the
// discrete env, 2 for the continuous one) and returns it. Gymnasium uses it
// to test the env; its mean return over seeded episodes is above 200.
func Heuristic(dst []float32, s []float32, continuous bool) []float32 {
	angleTarg := float64(s[0])*0.5 + float64(s[2])*1.0 // point towards the centre
	angleTarg = min(max(angleTarg, -0.4), 0.4)
	hoverTarg := 0.55 * math.Abs(float64(s[0]))
	angleTodo := (angleTarg-float64(s[4]))*0.5 - float64(s[5])*1.0
	hoverTodo := (hoverTarg-float64(s[1]))*0.5 - float64(s[3])*0.5
	if s[6] != 0 || s[7] != 0 { // legs touch: only slow the fall
		angleTodo = 0
		hoverTodo = -float64(s[3]) * 0.5
	}
	if continuous {
		dst = scratch.Resize(dst, 2)
		dst[0] = float32(min(max(hoverTodo*20-1, -1), 1))
		dst[1] = float32(min(max(-angleTodo*20, -1), 1))
		return dst
	}
	dst = scratch.Resize(dst, 1)
	a := 0
	switch {
	case hoverTodo > math.Abs(angleTodo) && hoverTodo > 0.05:
		a = 2
	case angleTodo < -0.05:
		a = 3
	case angleTodo > +0.05:
		a = 1
	}
	dst[0] = float32(a)
	return dst
}

var _ core.Env = (*LunarLander)(nil)
