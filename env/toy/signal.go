// Package toy holds small envs built to exercise what the ports do not:
// agents with different action and observation spaces (Signal,
// "toy/signal_v0", optionally observing Dicts) and a Dict observation
// space (GoalLine, "toy/GoalLine-v0"). They are cheap, deterministic from
// the reset seed, and registered in package env.
package toy

import (
	"fmt"
	"math"

	"herd/env/internal/core"
)

// SignalConfig holds toy/signal_v0's keywords.
type SignalConfig struct {
	Targets   int // K: targets the speaker can name (default 4, ≥ 2)
	MaxCycles int // episode length (default 8)
	// ContinuousListener makes the listener's action a Box of one value
	// in [−1, 1] (a position) instead of Discrete(K+1).
	ContinuousListener bool
	// DictObs makes the observations Dict spaces: the speaker's
	// {target: Discrete(K)}, the listener's {heard: Discrete(K+1) (K:
	// nothing yet), time: Box(1)}. Flattened (Gymnasium's
	// FlattenObservation, as a FlatVector does), they are the Box
	// observations' one-hots, the listener's with one more value for
	// "nothing heard".
	DictObs bool
}

// DefaultSignalConfig is toy/signal_v0's defaults.
func DefaultSignalConfig() SignalConfig { return SignalConfig{Targets: 4, MaxCycles: 8} }

// Signal is a two-agent referential game whose agents have different
// spaces, as PettingZoo's simple_speaker_listener has:
//
//   - speaker_0 observes the episode's target t ∈ {0, …, K−1} (one-hot, K
//     values) and acts with Discrete(K): the symbol it sends.
//   - listener_0 observes the symbol sent in the previous step (one-hot,
//     all zeros in the first step) and the elapsed fraction of the
//     episode (K+1 values), and acts with Discrete(K+1): a guess of t,
//     or K to pass. A right guess earns +1, a wrong one −1, a pass 0;
//     with ContinuousListener it acts with a Box of one value x in
//     [−1, 1] (clipped) and earns 1 − |x − g|, g = −1 + 2t/(K−1).
//
// Both agents get the listener's reward (one team), every episode lasts
// MaxCycles steps and ends truncated. The best return is MaxCycles − 1
// per agent with a discrete listener (it cannot know t in the first
// step); guessing at random earns −(K−1)/(K+1) per step.
type Signal struct {
	cfg      SignalConfig
	possible []string
	live     []string
	obsSp    [2]core.Space
	actSp    [2]core.Space

	rng     core.RNG
	target  int
	heard   int // −1: nothing yet
	steps   int
	running bool
	closed  bool

	obsBuf  [2][]float32
	obs     map[string][]float32
	rewards map[string]float64
	terms   map[string]bool
	truncs  map[string]bool
	infos   map[string]core.Info
}

// NewSignal returns toy/signal_v0.
func NewSignal(cfg SignalConfig) (*Signal, error) {
	if cfg.Targets < 2 || cfg.Targets > 1<<16 {
		return nil, fmt.Errorf("%w: toy/signal_v0 targets = %d, want 2 … 65536", core.ErrInvalidOption, cfg.Targets)
	}
	if cfg.MaxCycles < 1 {
		return nil, fmt.Errorf("%w: toy/signal_v0 max_cycles = %d, want ≥ 1", core.ErrInvalidOption, cfg.MaxCycles)
	}
	k := cfg.Targets
	e := &Signal{cfg: cfg, possible: []string{"speaker_0", "listener_0"},
		obs: map[string][]float32{}, rewards: map[string]float64{}, terms: map[string]bool{},
		truncs: map[string]bool{}, infos: map[string]core.Info{}}
	e.obsSp[0], e.obsSp[1] = core.UniformBox(0, 1, k), core.UniformBox(0, 1, k+1)
	if cfg.DictObs {
		var err error
		if e.obsSp[0], err = core.NewDict(map[string]core.Space{"target": core.Discrete{N: k}}); err != nil {
			return nil, err
		}
		if e.obsSp[1], err = core.NewDict(map[string]core.Space{"heard": core.Discrete{N: k + 1}, "time": core.UniformBox(0, 1, 1)}); err != nil {
			return nil, err
		}
	}
	e.actSp[0] = core.Discrete{N: k}
	if cfg.ContinuousListener {
		e.actSp[1] = core.UniformBox(-1, 1, 1)
	} else {
		e.actSp[1] = core.Discrete{N: k + 1}
	}
	e.obsBuf[0], e.obsBuf[1] = make([]float32, e.obsSp[0].Dim()), make([]float32, e.obsSp[1].Dim())
	e.live = make([]string, 0, 2)
	return e, nil
}

// PossibleAgents are speaker_0 and listener_0.
func (e *Signal) PossibleAgents() []string { return e.possible }

// Agents are the agents in the episode.
func (e *Signal) Agents() []string { return e.live }

// Teams puts both agents in one team: the game is cooperative.
func (e *Signal) Teams() []string { return []string{"signal", "signal"} }

func (e *Signal) index(agent string) (int, error) {
	for i, a := range e.possible {
		if a == agent {
			return i, nil
		}
	}
	return 0, fmt.Errorf("%w: toy/signal_v0 has no agent %q (agents: %v)", core.ErrInvalidOption, agent, e.possible)
}

// ObservationSpace is Box(K) for the speaker, Box(K+1) for the listener
// (Dicts with DictObs).
func (e *Signal) ObservationSpace(agent string) (core.Space, error) {
	i, err := e.index(agent)
	if err != nil {
		return nil, err
	}
	return e.obsSp[i], nil
}

// ActionSpace is Discrete(K) for the speaker, Discrete(K+1) (or a Box of
// one value) for the listener.
func (e *Signal) ActionSpace(agent string) (core.Space, error) {
	i, err := e.index(agent)
	if err != nil {
		return nil, err
	}
	return e.actSp[i], nil
}

// Reset draws the target from the seed's stream.
func (e *Signal) Reset(seed int64) (map[string][]float32, map[string]core.Info, error) {
	if e.closed {
		return nil, nil, fmt.Errorf("%w: toy/signal_v0.Reset", core.ErrClosed)
	}
	e.target = e.rng.Reset(seed).IntN(e.cfg.Targets)
	e.heard, e.steps, e.running = -1, 0, true
	e.live = append(e.live[:0], e.possible...)
	for _, a := range e.possible {
		e.infos[a] = core.Info{}
	}
	e.observe()
	return e.obs, e.infos, nil
}

func (e *Signal) observe() {
	s, l := e.obsBuf[0], e.obsBuf[1]
	if e.cfg.DictObs { // keys in order: heard, time
		s[0] = float32(e.target)
		l[0] = float32(e.cfg.Targets)
		if e.heard >= 0 {
			l[0] = float32(e.heard)
		}
		l[1] = float32(e.steps) / float32(e.cfg.MaxCycles)
		e.obs["speaker_0"], e.obs["listener_0"] = s, l
		return
	}
	clear(s)
	s[e.target] = 1
	clear(l)
	if e.heard >= 0 {
		l[e.heard] = 1
	}
	l[e.cfg.Targets] = float32(e.steps) / float32(e.cfg.MaxCycles)
	e.obs["speaker_0"], e.obs["listener_0"] = s, l
}

// Step takes the speaker's symbol and the listener's guess.
func (e *Signal) Step(actions map[string][]float32) (map[string][]float32, map[string]float64, map[string]bool, map[string]bool, map[string]core.Info, error) {
	if e.closed {
		return nil, nil, nil, nil, nil, fmt.Errorf("%w: toy/signal_v0.Step", core.ErrClosed)
	}
	if !e.running {
		return nil, nil, nil, nil, nil, fmt.Errorf("%w: toy/signal_v0.Step before Reset or after the episode ended", core.ErrNeedsReset)
	}
	for a := range actions {
		if _, err := e.index(a); err != nil {
			return nil, nil, nil, nil, nil, fmt.Errorf("%w: toy/signal_v0 has no agent %q", core.ErrInvalidAction, a)
		}
	}
	for i, a := range e.possible {
		act, ok := actions[a]
		if !ok {
			return nil, nil, nil, nil, nil, fmt.Errorf("%w: toy/signal_v0: no action for agent %q", core.ErrInvalidAction, a)
		}
		if err := core.CheckAction(e.actSp[i], act); err != nil {
			return nil, nil, nil, nil, nil, fmt.Errorf("toy/signal_v0 agent %q: %w", a, err)
		}
	}
	symbol := int(actions["speaker_0"][0])
	guess := actions["listener_0"]
	var r float64
	if e.cfg.ContinuousListener {
		x := math.Max(-1, math.Min(1, float64(guess[0])))
		g := -1 + 2*float64(e.target)/float64(e.cfg.Targets-1)
		r = 1 - math.Abs(x-g)
	} else {
		switch g := int(guess[0]); {
		case g == e.cfg.Targets:
			r = 0
		case g == e.target:
			r = 1
		default:
			r = -1
		}
	}
	e.heard = symbol
	e.steps++
	done := e.steps >= e.cfg.MaxCycles
	for _, a := range e.possible {
		e.rewards[a], e.terms[a], e.truncs[a] = r, false, done
	}
	e.observe()
	if done {
		e.live, e.running = e.live[:0], false
	}
	return e.obs, e.rewards, e.terms, e.truncs, e.infos, nil
}

// Close ends the env.
func (e *Signal) Close() error {
	e.closed = true
	return nil
}
