package toy

import (
	"fmt"

	"herd/env/internal/core"
)

// GoalLine is toy/GoalLine-v0, a single-agent env whose observation is a
// Dict space: {goal: Discrete(2), position: Box([−1], [1])}. The agent
// starts at 0 on a line and moves 0.25 left (action 0), stays (1) or
// moves 0.25 right (2); reaching the goal's end (−1 for goal 0, +1 for
// goal 1) earns +1 and terminates, every other step costs 0.05. The goal
// is drawn at reset, so a policy must read it: the best return is 0.85
// (four steps), one that ignores it averages less.
type GoalLine struct {
	space   core.Dict
	rng     core.RNG
	goal    int
	pos     int // in quarters: −4 … 4
	running bool
	obs     [2]float32 // keys in order: goal, position
}

// NewGoalLine returns toy/GoalLine-v0.
func NewGoalLine() *GoalLine {
	// Keys in order, as NewDict sorts them.
	d := core.Dict{Keys: []string{"goal", "position"}, Spaces: []core.Space{core.Discrete{N: 2}, core.UniformBox(-1, 1, 1)}}
	return &GoalLine{space: d}
}

// ObservationSpace is Dict(goal: Discrete(2), position: Box(1)).
func (g *GoalLine) ObservationSpace() core.Space { return g.space }

// ActionSpace is Discrete(3): left, stay, right.
func (g *GoalLine) ActionSpace() core.Space { return core.Discrete{N: 3} }

// Reset draws the goal from the seed's stream.
func (g *GoalLine) Reset(seed int64) ([]float32, core.Info, error) {
	g.goal = g.rng.Reset(seed).IntN(2)
	g.pos, g.running = 0, true
	return g.observe(), core.Info{}, nil
}

func (g *GoalLine) observe() []float32 {
	g.obs[0], g.obs[1] = float32(g.goal), float32(g.pos)/4
	return g.obs[:]
}

// Step moves the agent.
func (g *GoalLine) Step(a []float32) ([]float32, float64, bool, bool, core.Info, error) {
	if !g.running {
		return nil, 0, false, false, core.Info{}, fmt.Errorf("%w: toy/GoalLine-v0.Step before Reset or after the episode ended", core.ErrNeedsReset)
	}
	i, err := core.Discrete{N: 3}.Index(a)
	if err != nil {
		return nil, 0, false, false, core.Info{}, err
	}
	g.pos = max(-4, min(4, g.pos+i-1))
	if (g.goal == 0 && g.pos == -4) || (g.goal == 1 && g.pos == 4) {
		g.running = false
		return g.observe(), 1, true, false, core.Info{}, nil
	}
	return g.observe(), -0.05, false, false, core.Info{}, nil
}

// Close does nothing.
func (g *GoalLine) Close() error { return nil }
