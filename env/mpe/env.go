package mpe

import (
	"fmt"
	"math"

	"herd/env/internal/core"
)

// Env is one MPE scenario as a PettingZoo parallel env
// (parallel_env(**kwargs) of pettingzoo.mpe), satisfying env.Parallel.
//
// All agents act in every step and all leave Agents() together when the
// step counter reaches MaxCycles (truncation); MPE never terminates. The
// maps Reset and Step return are owned by the env and overwritten by the
// next call; they always hold every possible agent.
type Env struct {
	name       string
	sc         scenario
	w          *world
	continuous bool
	localRatio float64
	hasLocal   bool
	maxCycles  int

	possible  []string
	live      []string
	index     map[string]int
	obsSpaces []core.Space
	actSpaces []core.Space

	rng     core.RNG
	steps   int
	running bool
	closed  bool

	obs64   [][]float64
	obs     map[string][]float32
	obsBuf  [][]float32
	rewards map[string]float64
	terms   map[string]bool
	truncs  map[string]bool
	infos   map[string]core.Info
}

func newEnv(name string, sc scenario, w *world, continuous bool, localRatio *float64, maxCycles int) (*Env, error) {
	if maxCycles < 1 {
		return nil, fmt.Errorf("%w: %s max_cycles = %d, want ≥ 1", core.ErrInvalidOption, name, maxCycles)
	}
	e := &Env{
		name: name, sc: sc, w: w, continuous: continuous, maxCycles: maxCycles,
		index:   map[string]int{},
		obs:     map[string][]float32{},
		rewards: map[string]float64{},
		terms:   map[string]bool{},
		truncs:  map[string]bool{},
		infos:   map[string]core.Info{},
	}
	if localRatio != nil {
		if !(*localRatio >= 0 && *localRatio <= 1) {
			return nil, fmt.Errorf("%w: %s local_ratio = %v, want a proportion in [0, 1]", core.ErrInvalidOption, name, *localRatio)
		}
		e.localRatio, e.hasLocal = *localRatio, true
	}
	// The spaces, as SimpleEnv.__init__ sizes them (every agent moves).
	for i := range w.agents {
		ag := &w.agents[i]
		e.possible = append(e.possible, ag.name)
		e.index[ag.name] = i
		n := dimP*2 + 1
		if !ag.silent {
			if continuous {
				n += w.dimC
			} else {
				n *= w.dimC
			}
		}
		if continuous {
			e.actSpaces = append(e.actSpaces, core.UniformBox(0, 1, n))
		} else {
			e.actSpaces = append(e.actSpaces, core.Discrete{N: n})
		}
		o := sc.observe(w, i, nil)
		e.obs64 = append(e.obs64, o)
		e.obsSpaces = append(e.obsSpaces, core.UniformBox(float32(math.Inf(-1)), float32(math.Inf(1)), len(o)))
		e.obsBuf = append(e.obsBuf, make([]float32, len(o)))
	}
	e.live = make([]string, 0, len(e.possible))
	return e, nil
}

// Name is PettingZoo's metadata["name"], e.g. "simple_spread_v3".
func (e *Env) Name() string { return e.name }

// MaxCycles is the episode length.
func (e *Env) MaxCycles() int { return e.maxCycles }

// PossibleAgents lists every agent name, in PettingZoo's order. The slice
// is the env's; do not modify it.
func (e *Env) PossibleAgents() []string { return e.possible }

// GlobalState is PettingZoo's state() of MPE (SimpleEnv.state): every
// possible agent's observation of the current world, float32,
// concatenated in PossibleAgents order (State is the world's own
// variables). It is appended to dst[:0].
func (e *Env) GlobalState(dst []float32) []float32 {
	dst = dst[:0]
	for i := range e.possible {
		dst = append(dst, e.obsBuf[i]...)
	}
	return dst
}

// GlobalStateSpace is PettingZoo's state_space: an unbounded Box of the
// summed observation sizes.
func (e *Env) GlobalStateSpace() core.Space {
	n := 0
	for _, o := range e.obsBuf {
		n += len(o)
	}
	return core.UniformBox(float32(math.Inf(-1)), float32(math.Inf(1)), n)
}

// Teams names each possible agent's team, in PossibleAgents order:
// "adversary" for simple_tag's adversaries (rewarded for the collisions
// the good agents are penalized for), "agent" for every other agent, so
// the cooperative scenarios have one team.
func (e *Env) Teams() []string {
	out := make([]string, len(e.w.agents))
	for i := range e.w.agents {
		out[i] = "agent"
		if e.w.agents[i].adversary {
			out[i] = "adversary"
		}
	}
	return out
}

// Agents lists the agents still in the episode (all of them until the
// episode ends, none after). The slice is the env's; do not modify it.
func (e *Env) Agents() []string { return e.live }

// ObservationSpace is agent's observation space: an unbounded float32 Box.
func (e *Env) ObservationSpace(agent string) (core.Space, error) {
	i, err := e.agentIndex(agent)
	if err != nil {
		return nil, err
	}
	return e.obsSpaces[i], nil
}

// ActionSpace is agent's action space: Discrete(5) (or 5·dim_c for agents
// that speak) or, with continuous actions, Box(0, 1, 5 (+ dim_c)).
func (e *Env) ActionSpace(agent string) (core.Space, error) {
	i, err := e.agentIndex(agent)
	if err != nil {
		return nil, err
	}
	return e.actSpaces[i], nil
}

func (e *Env) agentIndex(agent string) (int, error) {
	i, ok := e.index[agent]
	if !ok {
		return 0, fmt.Errorf("%w: %s has no agent %q (agents: %v)", core.ErrInvalidOption, e.name, agent, e.possible)
	}
	return i, nil
}

// Reset starts an episode: every agent is back in Agents(), the world is
// drawn by the scenario's reset_world from the env's stream (reseeded when
// seed ≥ 0, see env.Env), and the first observations are returned.
func (e *Env) Reset(seed int64) (map[string][]float32, map[string]core.Info, error) {
	if e.closed {
		return nil, nil, fmt.Errorf("%w: %s.Reset", core.ErrClosed, e.name)
	}
	e.sc.reset(e.w, e.rng.Reset(seed))
	e.start()
	return e.obs, e.infos, nil
}

func (e *Env) start() {
	e.steps = 0
	e.running = true
	e.live = append(e.live[:0], e.possible...)
	for i, a := range e.possible {
		e.rewards[a] = 0
		e.terms[a] = false
		e.truncs[a] = false
		e.infos[a] = core.Info{}
		e.observe(i)
	}
}

func (e *Env) observe(i int) {
	e.obs64[i] = e.sc.observe(e.w, i, e.obs64[i])
	o := e.obsBuf[i]
	for k, v := range e.obs64[i] {
		o[k] = float32(v)
	}
	e.obs[e.possible[i]] = o
}

// Step takes one action for every agent in Agents() (and none for others),
// checks them all before changing anything, then advances the world one
// step. Discrete actions are the integer index (movement + 5·symbol for
// agents that speak); Box actions are clipped to [0, 1] as PettingZoo's
// ClipOutOfBoundsWrapper does.
func (e *Env) Step(actions map[string][]float32) (obs map[string][]float32, rewards map[string]float64, terminations, truncations map[string]bool, infos map[string]core.Info, err error) {
	if e.closed {
		return nil, nil, nil, nil, nil, fmt.Errorf("%w: %s.Step", core.ErrClosed, e.name)
	}
	if !e.running {
		return nil, nil, nil, nil, nil, fmt.Errorf("%w: %s.Step before Reset or after the episode ended", core.ErrNeedsReset, e.name)
	}
	if len(actions) != len(e.live) {
		for a := range actions {
			if _, ok := e.index[a]; !ok {
				return nil, nil, nil, nil, nil, fmt.Errorf("%w: %s has no agent %q", core.ErrInvalidAction, e.name, a)
			}
		}
		return nil, nil, nil, nil, nil, fmt.Errorf("%w: %s wants one action for each of the %d agents %v, got %d", core.ErrInvalidAction, e.name, len(e.live), e.live, len(actions))
	}
	for i, a := range e.possible {
		act, ok := actions[a]
		if !ok {
			return nil, nil, nil, nil, nil, fmt.Errorf("%w: %s: no action for agent %q", core.ErrInvalidAction, e.name, a)
		}
		if err := e.checkAction(i, act); err != nil {
			return nil, nil, nil, nil, nil, fmt.Errorf("%s agent %q: %w", e.name, a, err)
		}
	}
	for i, a := range e.possible {
		e.setAction(i, actions[a])
	}
	e.w.step()
	e.stepRewards()
	e.steps++
	if e.steps >= e.maxCycles {
		for _, a := range e.possible {
			e.truncs[a] = true
		}
		e.live = e.live[:0]
		e.running = false
	}
	for i := range e.possible {
		e.observe(i)
	}
	return e.obs, e.rewards, e.terms, e.truncs, e.infos, nil
}

func (e *Env) checkAction(i int, a []float32) error {
	if e.continuous {
		return e.actSpaces[i].(core.Box).Check(a)
	}
	_, err := e.actSpaces[i].(core.Discrete).Index(a)
	return err
}

// setAction is SimpleEnv._execute_world_step's split of the action into
// movement and communication, then _set_action.
func (e *Env) setAction(i int, a []float32) {
	ag := &e.w.agents[i]
	ag.u = [dimP]float64{}
	clear(ag.act)
	const mdim = dimP*2 + 1
	if e.continuous {
		var c [mdim]float32
		for k := range mdim {
			c[k] = clip01(a[k])
		}
		// float32 differences, as NumPy subtracts two float32 scalars.
		ag.u[0] += float64(float32(c[2] - c[1]))
		ag.u[1] += float64(float32(c[4] - c[3]))
		if !ag.silent {
			for k := range ag.act {
				ag.act[k] = float64(clip01(a[mdim+k]))
			}
		}
	} else {
		idx := int(a[0])
		switch idx % mdim {
		case 1:
			ag.u[0] = -1.0
		case 2:
			ag.u[0] = +1.0
		case 3:
			ag.u[1] = -1.0
		case 4:
			ag.u[1] = +1.0
		}
		if !ag.silent {
			ag.act[idx/mdim] = 1.0
		}
	}
	ag.u[0] *= ag.accel
	ag.u[1] *= ag.accel
}

func clip01(v float32) float32 { return min(max(v, 0), 1) }

// stepRewards is the reward part of _execute_world_step.
func (e *Env) stepRewards() {
	global := 0.0
	if e.hasLocal {
		global = e.sc.globalReward(e.w)
	}
	for i, a := range e.possible {
		r := e.sc.reward(e.w, i)
		if e.hasLocal {
			r = global*(1-e.localRatio) + r*e.localRatio
		}
		e.rewards[a] = r
	}
}

// Close ends the env; further calls return env.ErrClosed.
func (e *Env) Close() error {
	e.closed = true
	e.running = false
	e.live = e.live[:0]
	return nil
}
