package mpe

import "math"

// The world's physics constants (PettingZoo's core.World).
const (
	dt            = 0.1
	damping       = 0.25
	contactForce  = 1e2
	contactMargin = 1e-3
	dimP          = 2
	defaultAccel  = 5.0 // SimpleEnv._set_action's "sensitivity"
	loge2         = 0.693147180559945309417232121458176568
)

// entity is an agent or a landmark (core.Entity); agents come first in
// world.ents, in PettingZoo's world.entities order.
type entity struct {
	pos, vel [dimP]float64
	size     float64
	movable  bool
	collide  bool
	// maxSpeed caps |vel| when hasMaxSpeed (simple_tag).
	maxSpeed    float64
	hasMaxSpeed bool
}

// agent is an Agent's own part: its action and its communication state.
type agent struct {
	name      string
	silent    bool
	accel     float64
	adversary bool // simple_tag
	goal      int  // simple_reference: index of the goal landmark (goal_b)
	u         [dimP]float64
	act       []float64 // action.c: the communication action
	comm      []float64 // state.c: what the others observe
}

// world is core.World with its entities in flat arrays.
type world struct {
	ents   []entity // agents, then landmarks
	agents []agent
	nAg    int
	dimC   int
	force  [][dimP]float64
	hasF   []bool
}

func newWorld(nAgents, nLandmarks, dimC int) *world {
	w := &world{
		ents:   make([]entity, nAgents+nLandmarks),
		agents: make([]agent, nAgents),
		nAg:    nAgents,
		dimC:   dimC,
		force:  make([][dimP]float64, nAgents+nLandmarks),
		hasF:   make([]bool, nAgents+nLandmarks),
	}
	for i := range w.agents {
		w.agents[i].accel = defaultAccel
		w.agents[i].act = make([]float64, dimC)
		w.agents[i].comm = make([]float64, dimC)
		w.ents[i] = entity{size: 0.050, movable: true, collide: true}
	}
	for i := nAgents; i < len(w.ents); i++ {
		w.ents[i] = entity{size: 0.050, collide: true}
	}
	return w
}

func (w *world) landmark(j int) *entity { return &w.ents[w.nAg+j] }

// step is World.step: action forces, collision forces, integration, then
// communication states. Every operation is in NumPy's order, in float64.
func (w *world) step() {
	// apply_action_force (u_noise is None: the noise is 0.0).
	for i := range w.ents {
		w.hasF[i] = false
		w.force[i] = [dimP]float64{}
	}
	for i := range w.agents {
		if w.ents[i].movable {
			w.force[i] = w.agents[i].u
			w.hasF[i] = true
		}
	}
	// apply_environment_force: every pair a < b, in order.
	for a := range w.ents {
		ea := &w.ents[a]
		for b := a + 1; b < len(w.ents); b++ {
			eb := &w.ents[b]
			if !ea.collide || !eb.collide {
				continue
			}
			if !ea.movable && !eb.movable {
				continue // both forces are None
			}
			f := collisionForce(ea, eb)
			if ea.movable {
				for k := range dimP {
					w.force[a][k] = f[k] + w.force[a][k]
				}
				w.hasF[a] = true
			}
			if eb.movable {
				for k := range dimP {
					w.force[b][k] = -f[k] + w.force[b][k]
				}
				w.hasF[b] = true
			}
		}
	}
	// integrate_state (mass 1: force/mass is force).
	for i := range w.ents {
		e := &w.ents[i]
		if !e.movable {
			continue
		}
		for k := range dimP {
			e.pos[k] += float64(e.vel[k] * dt)
		}
		for k := range dimP {
			e.vel[k] = e.vel[k] * (1 - damping)
		}
		if w.hasF[i] {
			for k := range dimP {
				e.vel[k] += float64((w.force[i][k] / 1.0) * dt)
			}
		}
		if e.hasMaxSpeed {
			speed := math.Sqrt(sq(e.vel[0]) + sq(e.vel[1]))
			if speed > e.maxSpeed {
				s := math.Sqrt(sq(e.vel[0]) + sq(e.vel[1]))
				for k := range dimP {
					e.vel[k] = float64(e.vel[k]/s) * e.maxSpeed
				}
			}
		}
	}
	// update_agent_state (c_noise is None).
	for i := range w.agents {
		ag := &w.agents[i]
		if ag.silent {
			clear(ag.comm)
		} else {
			copy(ag.comm, ag.act)
		}
	}
}

// collisionForce is get_collision_force's force on a (b gets its negation):
// a softplus of the penetration depth along the line between the centres.
func collisionForce(a, b *entity) [dimP]float64 {
	var delta [dimP]float64
	for k := range dimP {
		delta[k] = a.pos[k] - b.pos[k]
	}
	dist := math.Sqrt(sq(delta[0]) + sq(delta[1]))
	distMin := a.size + b.size
	k := contactMargin
	pen := logaddexp0(-(dist-distMin)/k) * k
	var f [dimP]float64
	for i := range dimP {
		f[i] = float64(float64(contactForce*delta[i])/dist) * pen
	}
	return f
}

// logaddexp0 is np.logaddexp(0, y), as NumPy computes it (npy_logaddexp).
func logaddexp0(y float64) float64 {
	if y == 0 {
		return loge2
	}
	tmp := -y
	if tmp > 0 {
		return math.Log1p(math.Exp(-tmp))
	}
	if tmp <= 0 {
		return y + math.Log1p(math.Exp(tmp))
	}
	return tmp // NaN
}

// dist is np.sqrt(np.sum(np.square(a − b))).
func dist(a, b *entity) float64 {
	return math.Sqrt(sq(a.pos[0]-b.pos[0]) + sq(a.pos[1]-b.pos[1]))
}

// isCollision is the scenarios' is_collision.
func isCollision(a, b *entity) bool { return dist(a, b) < a.size+b.size }

// sq is np.square; the conversion keeps the compiler from fusing it into
// a following addition, which NumPy never does.
func sq(x float64) float64 { return float64(x * x) }

// npExp is np.exp of a float64 scalar.
func npExp(x float64) float64 { return math.Exp(x) }
