package mpe

import (
	"fmt"
	"math/rand/v2"
)

// scenario is a BaseScenario: how a world starts and what each agent
// observes and earns.
type scenario interface {
	// reset draws the initial state (reset_world) from r.
	reset(w *world, r *rand.Rand)
	// observe appends agent i's observation to dst[:0].
	observe(w *world, i int, dst []float64) []float64
	// reward is agent i's own reward (Scenario.reward).
	reward(w *world, i int) float64
	// globalReward is Scenario.global_reward (used with a local ratio).
	globalReward(w *world) float64
}

// uniform is NumPy's Generator.uniform(low, high): low + (high − low)·U.
func uniform(r *rand.Rand, low, high float64) float64 {
	return low + (high-low)*r.Float64()
}

func appendRel(dst []float64, e, self *entity) []float64 {
	return append(dst, e.pos[0]-self.pos[0], e.pos[1]-self.pos[1])
}

// --- simple_spread ---------------------------------------------------------

// spread is simple_spread's Scenario: N agents cover N landmarks; the
// global reward is minus the sum over landmarks of the nearest agent's
// distance, the local one −1 per collision with another agent.
type spread struct{}

func newSpreadWorld(n int) *world {
	w := newWorld(n, n, 2)
	for i := range n {
		w.agents[i].name = fmt.Sprintf("agent_%d", i)
		w.agents[i].silent = true
		w.ents[i].size = 0.15
		w.landmark(i).collide = false
	}
	return w
}

func (spread) reset(w *world, r *rand.Rand) {
	place(w, r, 1)
}

func (spread) reward(w *world, i int) float64 {
	rew := 0.0
	self := &w.ents[i]
	if self.collide {
		for a := range w.agents {
			if a != i && isCollision(&w.ents[a], self) {
				rew -= 1.0
			}
		}
	}
	return rew
}

func (spread) globalReward(w *world) float64 {
	rew := 0.0
	for j := w.nAg; j < len(w.ents); j++ {
		lm := &w.ents[j]
		m := dist(&w.ents[0], lm)
		for a := 1; a < w.nAg; a++ {
			m = min(m, dist(&w.ents[a], lm))
		}
		rew -= m
	}
	return rew
}

func (spread) observe(w *world, i int, dst []float64) []float64 {
	self := &w.ents[i]
	dst = append(dst[:0], self.vel[0], self.vel[1], self.pos[0], self.pos[1])
	for j := w.nAg; j < len(w.ents); j++ {
		dst = appendRel(dst, &w.ents[j], self)
	}
	for a := range w.agents {
		if a != i {
			dst = appendRel(dst, &w.ents[a], self)
		}
	}
	for a := range w.agents {
		if a != i {
			dst = append(dst, w.agents[a].comm...)
		}
	}
	return dst
}

// --- simple_tag ------------------------------------------------------------

// tag is simple_tag's Scenario: slower adversaries (first in the agent
// list) chase faster good agents among obstacles.
type tag struct{}

func newTagWorld(numGood, numAdv, numObstacles int) *world {
	n := numGood + numAdv
	w := newWorld(n, numObstacles, 2)
	for i := range n {
		ag := &w.agents[i]
		ag.adversary = i < numAdv
		ag.silent = true
		e := &w.ents[i]
		if ag.adversary {
			ag.name = fmt.Sprintf("adversary_%d", i)
			e.size, ag.accel, e.maxSpeed = 0.075, 3.0, 1.0
		} else {
			ag.name = fmt.Sprintf("agent_%d", i-numAdv)
			e.size, ag.accel, e.maxSpeed = 0.05, 4.0, 1.3
		}
		e.hasMaxSpeed = true
	}
	for j := range numObstacles {
		lm := w.landmark(j)
		lm.collide = true
		lm.size = 0.2
	}
	return w
}

func (tag) reset(w *world, r *rand.Rand) {
	place(w, r, 0.9)
}

// bound is agent_reward's penalty for leaving the screen.
func bound(x float64) float64 {
	if x < 0.9 {
		return 0
	}
	if x < 1.0 {
		return (x - 0.9) * 10
	}
	return min(npExp(2*x-2), 10)
}

func (tag) reward(w *world, i int) float64 {
	self := &w.ents[i]
	rew := 0.0
	if w.agents[i].adversary {
		if self.collide {
			for g := range w.agents {
				if w.agents[g].adversary {
					continue
				}
				for a := range w.agents {
					if w.agents[a].adversary && isCollision(&w.ents[g], &w.ents[a]) {
						rew += 10
					}
				}
			}
		}
		return rew
	}
	if self.collide {
		for a := range w.agents {
			if w.agents[a].adversary && isCollision(&w.ents[a], self) {
				rew -= 10
			}
		}
	}
	for k := range dimP {
		x := self.pos[k]
		if x < 0 {
			x = -x
		}
		rew -= bound(x)
	}
	return rew
}

func (tag) globalReward(*world) float64 { return 0 } // simple_tag has no local ratio

func (tag) observe(w *world, i int, dst []float64) []float64 {
	self := &w.ents[i]
	dst = append(dst[:0], self.vel[0], self.vel[1], self.pos[0], self.pos[1])
	for j := w.nAg; j < len(w.ents); j++ {
		dst = appendRel(dst, &w.ents[j], self)
	}
	for a := range w.agents {
		if a != i {
			dst = appendRel(dst, &w.ents[a], self)
		}
	}
	for a := range w.agents {
		if a != i && !w.agents[a].adversary {
			dst = append(dst, w.ents[a].vel[0], w.ents[a].vel[1])
		}
	}
	return dst
}

// --- simple_reference ------------------------------------------------------

// reference is simple_reference's Scenario: two agents, three coloured
// landmarks; each agent knows the landmark the OTHER must reach and can
// only tell it through its 10-symbol channel.
type reference struct{}

// referenceColor is the colour reset_world gives landmark j; an agent
// observes the colour of its goal landmark.
func referenceColor(j int) [3]float64 {
	c := [3]float64{0.25, 0.25, 0.25}
	c[j] = 0.75
	return c
}

func newReferenceWorld() *world {
	w := newWorld(2, 3, 10)
	for i := range 2 {
		w.agents[i].name = fmt.Sprintf("agent_%d", i)
		w.ents[i].collide = false
	}
	for j := range 3 {
		w.landmark(j).collide = false
	}
	return w
}

func (reference) reset(w *world, r *rand.Rand) {
	// np_random.choice(world.landmarks) for agent 0, then agent 1.
	w.agents[0].goal = r.IntN(3)
	w.agents[1].goal = r.IntN(3)
	place(w, r, 1)
}

// reward is minus the distance of the OTHER agent (goal_a) to this
// agent's goal landmark (goal_b).
func (reference) reward(w *world, i int) float64 {
	other := &w.ents[1-i]
	return -dist(other, w.landmark(w.agents[i].goal))
}

func (s reference) globalReward(w *world) float64 {
	return (0 + s.reward(w, 0) + s.reward(w, 1)) / 2
}

func (reference) observe(w *world, i int, dst []float64) []float64 {
	self := &w.ents[i]
	dst = append(dst[:0], self.vel[0], self.vel[1])
	for j := w.nAg; j < len(w.ents); j++ {
		dst = appendRel(dst, &w.ents[j], self)
	}
	c := referenceColor(w.agents[i].goal)
	dst = append(dst, c[:]...)
	for a := range w.agents {
		if a != i {
			dst = append(dst, w.agents[a].comm...)
		}
	}
	return dst
}

// place is every scenario's reset of the bodies, in PettingZoo's draw
// order: agents uniform in [−1, 1]², at rest and silent, then landmarks
// uniform in [−lim, lim]², at rest.
func place(w *world, r *rand.Rand, lim float64) {
	for i := range w.agents {
		e := &w.ents[i]
		e.pos = [2]float64{uniform(r, -1, 1), uniform(r, -1, 1)}
		e.vel = [2]float64{}
		clear(w.agents[i].comm)
	}
	for j := w.nAg; j < len(w.ents); j++ {
		w.ents[j].pos = [2]float64{uniform(r, -lim, lim), uniform(r, -lim, lim)}
		w.ents[j].vel = [2]float64{}
	}
}
