package env

import (
	"fmt"
	"slices"
)

// TurnEnv is a Parallel seen as one Env whose agents take turns, as in
// PettingZoo's AEC view: each Step takes the action of the next agent in
// Agents(); the world advances when the last one has acted. Observations
// are FlatVector's rows (padded, with the optional one-hot id), so a
// policy trained on a FlatVector acts here unchanged.
//
// The reward of the step that advances the world is the SUM of every
// agent's reward (0 on the other steps), so an episode's return is the
// team return, summed over agents; terminated is true when the episode
// ended with any termination, else truncated.
// env.Make builds one for a multi-agent id: this is what evaluation and
// checkpoint loading of a shared-parameter policy use.
type TurnEnv struct {
	p        Parallel
	flat     FlatVector // only its layout (writeObs, spaces)
	act      Space      // ActionSpace
	possible []string
	pending  map[string][]float32
	bufs     map[string][]float32
	last     map[string][]float32
	rewards  map[string]float64
	advanced bool
	order    []string // agents acting in this cycle
	cur      int
	obs      []float32
	state    []float32       // the global state for last (GlobalState)
	infos    map[string]Info // the infos that came with last
	running  bool
	closed   bool
}

// NewTurnEnv wraps p (and closes it when closed).
func NewTurnEnv(p Parallel, opt FlatOptions) (*TurnEnv, error) {
	pv, err := NewParallelVector(1, func(int) (Parallel, error) { return p, nil })
	if err != nil {
		return nil, err
	}
	opt.EpisodeStatistics = false
	f, err := NewFlatVector(pv, opt)
	if err != nil {
		return nil, err
	}
	t := &TurnEnv{p: p, flat: *f, possible: slices.Clone(p.PossibleAgents()),
		pending: map[string][]float32{}, bufs: map[string][]float32{}, act: f.actSpace}
	if opt.ActAs != "" {
		j := slices.Index(t.possible, opt.ActAs)
		if j < 0 {
			return nil, fmt.Errorf("%w: act_as %q is not an agent of %v", ErrInvalidOption, opt.ActAs, t.possible)
		}
		t.act = f.acts[j]
	}
	t.obs = make([]float32, f.obsDim)
	return t, nil
}

// ObservationSpace is a row's space (FlatVector.ObservationSpace).
func (t *TurnEnv) ObservationSpace() Space { return t.flat.obsSpace }

// ActionSpace is the agents' common action space, or FlatOptions.ActAs's
// agent's. With FlatOptions.AgentActionSpaces and agents whose spaces
// differ, and no ActAs, it is FlatVector's: a Box as wide as the widest
// agent's action. Step takes the current agent's own action
// (AgentActionSpace), alone or padded to the widest agent's.
func (t *TurnEnv) ActionSpace() Space { return t.act }

// AgentActionSpace is agent's action space (nil for an unknown name).
func (t *TurnEnv) AgentActionSpace(agent string) Space {
	j := slices.Index(t.possible, agent)
	if j < 0 {
		return nil
	}
	return t.flat.acts[j]
}

// RowLayout is the layout of an observation (FlatVector.RowLayout).
func (t *TurnEnv) RowLayout() RowLayout { return t.flat.RowLayout() }

// Parallel returns the wrapped env.
func (t *TurnEnv) Parallel() Parallel { return t.p }

// Agent is the agent whose turn it is (whose observation was returned last).
func (t *TurnEnv) Agent() string {
	if t.cur < len(t.order) {
		return t.order[t.cur]
	}
	return ""
}

func (t *TurnEnv) obsOf(agent string) []float32 {
	t.flat.writeObs(t.obs, t.last[agent], slices.Index(t.possible, agent), t.last, t.state, t.infos[agent].ActionMask)
	return t.obs
}

// Reset resets the env and returns the first agent's observation.
func (t *TurnEnv) Reset(seed int64) ([]float32, Info, error) {
	if t.closed {
		return nil, Info{}, fmt.Errorf("%w: turn env Reset", ErrClosed)
	}
	obs, infos, err := t.p.Reset(seed)
	if err != nil {
		return nil, Info{}, err
	}
	t.last, t.infos = obs, infos
	t.state = stateOf(t.p, t.state)
	t.rewards = nil
	t.order = append(t.order[:0], t.p.Agents()...)
	t.cur = 0
	if len(t.order) == 0 {
		return nil, Info{}, fmt.Errorf("%w: multi-agent env reset with no agents", ErrInvalidState)
	}
	t.running = true
	return t.obsOf(t.order[0]), Info{}, nil
}

// Step records the current agent's action; the last agent of the cycle
// advances the world.
func (t *TurnEnv) Step(action []float32) ([]float32, float64, bool, bool, Info, error) {
	if t.closed {
		return nil, 0, false, false, Info{}, fmt.Errorf("%w: turn env Step", ErrClosed)
	}
	if !t.running {
		return nil, 0, false, false, Info{}, fmt.Errorf("%w: turn env Step before Reset or after the episode ended", ErrNeedsReset)
	}
	a := t.order[t.cur]
	if t.flat.mixed {
		sp := t.AgentActionSpace(a)
		if len(action) > sp.Dim() && len(action) == t.flat.actSpace.Dim() {
			action = action[:sp.Dim()]
		}
		if err := CheckAction(sp, action); err != nil {
			return nil, 0, false, false, Info{}, fmt.Errorf("turn env agent %s: %w", a, err)
		}
	} else if err := CheckAction(t.flat.actSpace, action); err != nil {
		return nil, 0, false, false, Info{}, err
	}
	t.advanced = false
	t.bufs[a] = append(t.bufs[a][:0], action...)
	t.pending[a] = t.bufs[a]
	t.cur++
	if t.cur < len(t.order) {
		return t.obsOf(t.order[t.cur]), 0, false, false, Info{}, nil
	}
	obs, rew, term, _, infos, err := t.p.Step(t.pending)
	clear(t.pending)
	if err != nil {
		t.running = false
		return nil, 0, false, false, Info{}, err
	}
	t.rewards, t.advanced = rew, true
	sum := 0.0
	for _, a := range t.order {
		sum += rew[a]
	}
	t.last, t.infos = obs, infos
	t.state = stateOf(t.p, t.state)
	first := t.order[0]
	t.order = append(t.order[:0], t.p.Agents()...)
	t.cur = 0
	if len(t.order) > 0 {
		return t.obsOf(t.order[0]), sum, false, false, Info{}, nil
	}
	t.running = false
	anyTerm := false
	for _, a := range t.possible {
		anyTerm = anyTerm || term[a]
	}
	return t.obsOf(first), sum, anyTerm, !anyTerm, Info{}, nil
}

// LastRewards is every agent's reward of the last world step (the
// Parallel's map, valid until the next step that advances the world; nil
// before the first).
func (t *TurnEnv) LastRewards() map[string]float64 { return t.rewards }

// Advanced reports whether the last Step advanced the world (it was the
// last agent's turn), so LastRewards holds that step's rewards.
func (t *TurnEnv) Advanced() bool { return t.advanced }

// Close closes the env.
func (t *TurnEnv) Close() error {
	if t.closed {
		return nil
	}
	t.closed = true
	t.running = false
	return t.p.Close()
}
