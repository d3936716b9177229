package mpe

import (
	"fmt"
	"math"

	"herd/env/internal/core"
)

// SpreadConfig holds simple_spread_v3's keywords.
type SpreadConfig struct {
	N                 int     // agents and landmarks (default 3)
	LocalRatio        float64 // weight of the local (collision) reward (0.5)
	MaxCycles         int     // episode length (25)
	ContinuousActions bool
}

// DefaultSpreadConfig is simple_spread_v3's defaults.
func DefaultSpreadConfig() SpreadConfig { return SpreadConfig{N: 3, LocalRatio: 0.5, MaxCycles: 25} }

// NewSimpleSpread returns simple_spread_v3: N agents learn to cover N
// landmarks without colliding. Agent names are agent_0 … agent_{N−1}.
func NewSimpleSpread(cfg SpreadConfig) (*Env, error) {
	if cfg.N < 1 {
		return nil, fmt.Errorf("%w: simple_spread_v3 N = %d, want ≥ 1", core.ErrInvalidOption, cfg.N)
	}
	lr := cfg.LocalRatio
	return newEnv("simple_spread_v3", spread{}, newSpreadWorld(cfg.N), cfg.ContinuousActions, &lr, cfg.MaxCycles)
}

// TagConfig holds simple_tag_v3's keywords.
type TagConfig struct {
	NumGood           int // good (prey) agents (default 1)
	NumAdversaries    int // adversaries (3)
	NumObstacles      int // landmarks that block (2)
	MaxCycles         int // episode length (25)
	ContinuousActions bool
}

// DefaultTagConfig is simple_tag_v3's defaults.
func DefaultTagConfig() TagConfig {
	return TagConfig{NumGood: 1, NumAdversaries: 3, NumObstacles: 2, MaxCycles: 25}
}

// NewSimpleTag returns simple_tag_v3: adversary_0 … chase agent_0 …
// around obstacles; each adversary earns +10 per touch of any adversary
// on any good agent, a good agent −10 per touch and a penalty for leaving
// [−0.9, 0.9]². There is no shared reward (no local ratio).
func NewSimpleTag(cfg TagConfig) (*Env, error) {
	if cfg.NumGood < 0 || cfg.NumAdversaries < 0 || cfg.NumObstacles < 0 || cfg.NumGood+cfg.NumAdversaries < 1 {
		return nil, fmt.Errorf("%w: simple_tag_v3 num_good = %d, num_adversaries = %d, num_obstacles = %d: want counts ≥ 0 and at least one agent",
			core.ErrInvalidOption, cfg.NumGood, cfg.NumAdversaries, cfg.NumObstacles)
	}
	return newEnv("simple_tag_v3", tag{}, newTagWorld(cfg.NumGood, cfg.NumAdversaries, cfg.NumObstacles), cfg.ContinuousActions, nil, cfg.MaxCycles)
}

// ReferenceConfig holds simple_reference_v3's keywords.
type ReferenceConfig struct {
	LocalRatio        float64 // weight of the agent's own reward (0.5)
	MaxCycles         int     // episode length (25)
	ContinuousActions bool
}

// DefaultReferenceConfig is simple_reference_v3's defaults.
func DefaultReferenceConfig() ReferenceConfig { return ReferenceConfig{LocalRatio: 0.5, MaxCycles: 25} }

// NewSimpleReference returns simple_reference_v3: agent_0 and agent_1 each
// see the colour of the landmark the OTHER must reach and can tell it
// through a 10-symbol channel (Discrete(50) = 5 moves × 10 symbols, or a
// Box of 5 + 10 values).
func NewSimpleReference(cfg ReferenceConfig) (*Env, error) {
	lr := cfg.LocalRatio
	return newEnv("simple_reference_v3", reference{}, newReferenceWorld(), cfg.ContinuousActions, &lr, cfg.MaxCycles)
}

// State is the world state PettingZoo's reset_world draws: what a test
// sets to replay an episode recorded in Python, whose random stream herd
// does not reproduce.
type State struct {
	// AgentPos, AgentVel and AgentComm are p_pos, p_vel and c of each
	// agent, in PossibleAgents order.
	AgentPos, AgentVel [][2]float64
	AgentComm          [][]float64
	// LandmarkPos is p_pos of each landmark (landmarks never move).
	LandmarkPos [][2]float64
	// Goals is, for simple_reference, the index of each agent's goal
	// landmark (goal_b); empty for the other scenarios.
	Goals []int
}

// State returns a copy of the world state.
func (e *Env) State() State {
	w := e.w
	s := State{}
	for i := range w.agents {
		s.AgentPos = append(s.AgentPos, w.ents[i].pos)
		s.AgentVel = append(s.AgentVel, w.ents[i].vel)
		s.AgentComm = append(s.AgentComm, append([]float64(nil), w.agents[i].comm...))
		if _, ok := e.sc.(reference); ok {
			s.Goals = append(s.Goals, w.agents[i].goal)
		}
	}
	for j := w.nAg; j < len(w.ents); j++ {
		s.LandmarkPos = append(s.LandmarkPos, w.ents[j].pos)
	}
	return s
}

// SetState replaces the world state of the running episode (after Reset;
// the step counter is kept) and returns the observations of the new state.
func (e *Env) SetState(s State) (map[string][]float32, error) {
	if e.closed {
		return nil, fmt.Errorf("%w: %s.SetState", core.ErrClosed, e.name)
	}
	if !e.running {
		return nil, fmt.Errorf("%w: %s.SetState before Reset or after the episode ended", core.ErrNeedsReset, e.name)
	}
	w := e.w
	_, isRef := e.sc.(reference)
	wantGoals := 0
	if isRef {
		wantGoals = w.nAg
	}
	if len(s.AgentPos) != w.nAg || len(s.AgentVel) != w.nAg || len(s.AgentComm) != w.nAg ||
		len(s.LandmarkPos) != len(w.ents)-w.nAg || len(s.Goals) != wantGoals {
		return nil, fmt.Errorf("%w: %s state has %d/%d/%d agent positions/velocities/channels, %d landmarks and %d goals; want %d, %d, %d",
			core.ErrInvalidState, e.name, len(s.AgentPos), len(s.AgentVel), len(s.AgentComm), len(s.LandmarkPos), len(s.Goals),
			w.nAg, len(w.ents)-w.nAg, wantGoals)
	}
	finite := func(xs ...float64) bool {
		for _, x := range xs {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return false
			}
		}
		return true
	}
	for i := range w.nAg {
		if len(s.AgentComm[i]) != w.dimC || !finite(s.AgentPos[i][:]...) || !finite(s.AgentVel[i][:]...) || !finite(s.AgentComm[i]...) {
			return nil, fmt.Errorf("%w: %s agent %d: want finite values and %d channel values", core.ErrInvalidState, e.name, i, w.dimC)
		}
		if isRef && (s.Goals[i] < 0 || s.Goals[i] >= len(w.ents)-w.nAg) {
			return nil, fmt.Errorf("%w: %s agent %d goal %d out of range", core.ErrInvalidState, e.name, i, s.Goals[i])
		}
	}
	for j, p := range s.LandmarkPos {
		if !finite(p[:]...) {
			return nil, fmt.Errorf("%w: %s landmark %d: non-finite position", core.ErrInvalidState, e.name, j)
		}
	}
	for i := range w.nAg {
		w.ents[i].pos, w.ents[i].vel = s.AgentPos[i], s.AgentVel[i]
		copy(w.agents[i].comm, s.AgentComm[i])
		if isRef {
			w.agents[i].goal = s.Goals[i]
		}
	}
	for j, p := range s.LandmarkPos {
		w.ents[w.nAg+j].pos = p
	}
	for i := range e.possible {
		e.observe(i)
	}
	return e.obs, nil
}
