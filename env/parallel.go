package env

import (
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"herd/env/mpe"
	"herd/env/toy"
)

// Parallel is a multi-agent env with PettingZoo's Parallel API semantics,
// as Env follows Gymnasium's: every agent still in the episode acts in
// every step.
//
//   - PossibleAgents lists every agent that can ever appear, in a fixed
//     order; Agents lists those still in the episode. An agent whose step
//     returned terminated or truncated leaves Agents; the episode is over
//     when Agents is empty (Step then returns ErrNeedsReset).
//   - Reset(seed) returns an observation (and an info) for every agent in
//     Agents; seeding is Env's (seed ≥ 0 reseeds, NoSeed continues).
//   - Step takes exactly one action for each agent in Agents (an action for
//     any other name, or a missing one, is ErrInvalidAction and changes
//     nothing) and returns, for each agent that acted, its next
//     observation, reward, terminated and truncated flags and info.
//
// The maps and slices a Parallel returns are owned by it and valid until
// the next Reset or Step, so stepping can be allocation-free; the caller
// owns the actions map. Agent names index every map; ObservationSpace and
// ActionSpace return ErrInvalidOption for a name not in PossibleAgents. A
// Parallel is used by one goroutine.
type Parallel interface {
	PossibleAgents() []string
	Agents() []string
	ObservationSpace(agent string) (Space, error)
	ActionSpace(agent string) (Space, error)
	Reset(seed int64) (obs map[string][]float32, infos map[string]Info, err error)
	Step(actions map[string][]float32) (obs map[string][]float32, rewards map[string]float64,
		terminations, truncations map[string]bool, infos map[string]Info, err error)
	Close() error
}

// GlobalState is the part of PettingZoo's Parallel API that a centralized
// critic reads (ParallelEnv.state() and state_space), implemented by the
// Parallels that have it (MPE): GlobalState appends the global state of
// the current step, GlobalStateSpace().Dim() values, to dst[:0] and
// returns it; it is valid after Reset and after every Step, including the
// one that ends the episode.
type GlobalState interface {
	GlobalState(dst []float32) []float32
	GlobalStateSpace() Space
}

// ParallelSpec is a registered multi-agent env.
type ParallelSpec struct {
	// ID is the id without keywords, e.g. "mpe/simple_spread_v3".
	ID    string
	build func(kw Kwargs) (Parallel, error)
}

// parallelSpecs is the multi-agent registry (a function: no global state).
func parallelSpecs() []ParallelSpec {
	return []ParallelSpec{
		{ID: "mpe/simple_spread_v3", build: buildSimpleSpread},
		{ID: "mpe/simple_tag_v3", build: buildSimpleTag},
		{ID: "mpe/simple_reference_v3", build: buildSimpleReference},
		{ID: "toy/signal_v0", build: buildSignal},
	}
}

// ParallelIDs lists the registered multi-agent ids.
func ParallelIDs() []string {
	var ids []string
	for _, s := range parallelSpecs() {
		ids = append(ids, s.ID)
	}
	return ids
}

// IsParallel reports whether id names a registered multi-agent env (with
// or without "?keyword=value" options). IsParallel is the zero Maker's.
func IsParallel(id string) bool { return Maker{}.IsParallel(id) }

// IsParallel is env.IsParallel with m's remote ids: for one of them the
// Opener asks the server, and an unreachable server answers false.
func (m Maker) IsParallel(id string) bool {
	ok, _ := m.CheckParallel(id)
	return ok
}

// CheckParallel is IsParallel with the error that kept it from telling
// for a remote id (a malformed id, a server that cannot be reached).
func (m Maker) CheckParallel(id string) (bool, error) {
	if m.opens(id) {
		return m.Remote.IsParallel(id)
	}
	return isParallelID(id), nil
}

func isParallelID(id string) bool {
	base, _, _ := strings.Cut(id, "?")
	for _, s := range parallelSpecs() {
		if s.ID == base {
			return true
		}
	}
	return false
}

// parallelID splits "mpe/simple_spread_v3?N=4&local_ratio=0.25" into its
// spec and keywords. Values are read as bools (true/false), then numbers,
// else strings. The keywords agent_id, action_mask and state (bools) are
// not the env's: they ask Make and MakeVector to append a one-hot agent
// id, the action mask and the global state to each row (FlatOptions);
// act_as (an agent name) is FlatOptions.ActAs.
func parallelID(id string) (ParallelSpec, Kwargs, error) {
	base, query, _ := strings.Cut(id, "?")
	var spec ParallelSpec
	found := false
	for _, s := range parallelSpecs() {
		if s.ID == base {
			spec, found = s, true
		}
	}
	if !found {
		return ParallelSpec{}, nil, fmt.Errorf("%w %q; known multi-agent ids: %s", ErrUnknownID, base, strings.Join(ParallelIDs(), ", "))
	}
	kw := Kwargs{}
	if query != "" {
		vals, err := url.ParseQuery(query)
		if err != nil {
			return ParallelSpec{}, nil, fmt.Errorf("%w: %s: %w", ErrInvalidOption, id, err)
		}
		for k, v := range vals {
			if len(v) != 1 {
				return ParallelSpec{}, nil, fmt.Errorf("%w: %s: keyword %s given %d times", ErrInvalidOption, id, k, len(v))
			}
			switch s := v[0]; {
			case s == "true" || s == "false":
				kw[k] = s == "true"
			default:
				if f, err := strconv.ParseFloat(s, 64); err == nil {
					kw[k] = f
				} else {
					kw[k] = s
				}
			}
		}
	}
	return spec, kw, nil
}

// MakeParallel builds the multi-agent env registered as id. Keywords come
// from the id ("mpe/simple_spread_v3?N=4&continuous_actions=true") and
// from WithKwargs, as pettingzoo's parallel_env(**kwargs); unknown ones
// are an error. Other options do not apply to a Parallel and are ignored.
// MakeParallel is the zero Maker's: remote ids need a Maker with a remote
// Opener.
func MakeParallel(id string, opts ...Option) (Parallel, error) {
	return Maker{}.MakeParallel(id, opts...)
}

// MakeParallel is env.MakeParallel with m's remote ids.
func (m Maker) MakeParallel(id string, opts ...Option) (Parallel, error) {
	p, _, err := m.makeParallel(id, opts)
	return p, err
}

// makeParallel also returns the row options asked for in the id
// (agent_id, state).
func (m Maker) makeParallel(id string, opts []Option) (Parallel, FlatOptions, error) {
	o := ReadOptions(opts...)
	if m.opens(id) {
		return m.Remote.MakeParallel(id, o)
	}
	var fo FlatOptions
	spec, kw, err := parallelID(id)
	if err != nil {
		return nil, fo, err
	}
	for k, v := range o.Kwargs {
		kw[k] = v
	}
	if fo.AgentID, err = kw.Bool("agent_id", false, map[string]bool{}); err != nil {
		return nil, fo, err
	}
	if fo.State, err = kw.Bool("state", false, map[string]bool{}); err != nil {
		return nil, fo, err
	}
	if fo.ActionMask, err = kw.Bool("action_mask", false, map[string]bool{}); err != nil {
		return nil, fo, err
	}
	if fo.ActAs, err = kw.String("act_as", "", map[string]bool{}); err != nil {
		return nil, fo, err
	}
	delete(kw, "agent_id")
	delete(kw, "state")
	delete(kw, "action_mask")
	delete(kw, "act_as")
	p, err := spec.build(kw)
	if err != nil {
		return nil, fo, fmt.Errorf("env: make %s: %w", id, err)
	}
	return p, fo, nil
}

// intKw reads an integral keyword.
func intKw(kw Kwargs, name string, def int, used map[string]bool) (int, error) {
	f, err := kw.Float(name, float64(def), used)
	if err != nil {
		return 0, err
	}
	if f != math.Trunc(f) || math.Abs(f) > 1<<30 {
		return 0, fmt.Errorf("%w: %s = %v, want an integer", ErrInvalidOption, name, f)
	}
	return int(f), nil
}

func buildSimpleSpread(kw Kwargs) (Parallel, error) {
	used := map[string]bool{}
	cfg := mpe.DefaultSpreadConfig()
	var err error
	get := func(f func() error) {
		if err == nil {
			err = f()
		}
	}
	get(func() (e error) { cfg.N, e = intKw(kw, "N", cfg.N, used); return })
	get(func() (e error) { cfg.LocalRatio, e = kw.Float("local_ratio", cfg.LocalRatio, used); return })
	get(func() (e error) { cfg.MaxCycles, e = intKw(kw, "max_cycles", cfg.MaxCycles, used); return })
	get(func() (e error) { cfg.ContinuousActions, e = kw.Bool("continuous_actions", false, used); return })
	get(func() error { return kw.Unused("simple_spread_v3", used) })
	if err != nil {
		return nil, err
	}
	e, err := mpe.NewSimpleSpread(cfg)
	if err != nil {
		return nil, err
	}
	return e, nil
}

func buildSimpleTag(kw Kwargs) (Parallel, error) {
	used := map[string]bool{}
	cfg := mpe.DefaultTagConfig()
	var err error
	get := func(f func() error) {
		if err == nil {
			err = f()
		}
	}
	get(func() (e error) { cfg.NumGood, e = intKw(kw, "num_good", cfg.NumGood, used); return })
	get(func() (e error) {
		cfg.NumAdversaries, e = intKw(kw, "num_adversaries", cfg.NumAdversaries, used)
		return
	})
	get(func() (e error) { cfg.NumObstacles, e = intKw(kw, "num_obstacles", cfg.NumObstacles, used); return })
	get(func() (e error) { cfg.MaxCycles, e = intKw(kw, "max_cycles", cfg.MaxCycles, used); return })
	get(func() (e error) { cfg.ContinuousActions, e = kw.Bool("continuous_actions", false, used); return })
	get(func() error { return kw.Unused("simple_tag_v3", used) })
	if err != nil {
		return nil, err
	}
	e, err := mpe.NewSimpleTag(cfg)
	if err != nil {
		return nil, err
	}
	return e, nil
}

func buildSimpleReference(kw Kwargs) (Parallel, error) {
	used := map[string]bool{}
	cfg := mpe.DefaultReferenceConfig()
	var err error
	get := func(f func() error) {
		if err == nil {
			err = f()
		}
	}
	get(func() (e error) { cfg.LocalRatio, e = kw.Float("local_ratio", cfg.LocalRatio, used); return })
	get(func() (e error) { cfg.MaxCycles, e = intKw(kw, "max_cycles", cfg.MaxCycles, used); return })
	get(func() (e error) { cfg.ContinuousActions, e = kw.Bool("continuous_actions", false, used); return })
	get(func() error { return kw.Unused("simple_reference_v3", used) })
	if err != nil {
		return nil, err
	}
	e, err := mpe.NewSimpleReference(cfg)
	if err != nil {
		return nil, err
	}
	return e, nil
}

func buildSignal(kw Kwargs) (Parallel, error) {
	used := map[string]bool{}
	cfg := toy.DefaultSignalConfig()
	var err error
	get := func(f func() error) {
		if err == nil {
			err = f()
		}
	}
	get(func() (e error) { cfg.Targets, e = intKw(kw, "targets", cfg.Targets, used); return })
	get(func() (e error) { cfg.MaxCycles, e = intKw(kw, "max_cycles", cfg.MaxCycles, used); return })
	get(func() (e error) { cfg.ContinuousListener, e = kw.Bool("continuous_listener", false, used); return })
	get(func() (e error) { cfg.DictObs, e = kw.Bool("dict_obs", false, used); return })
	get(func() error { return kw.Unused("signal_v0", used) })
	if err != nil {
		return nil, err
	}
	e, err := toy.NewSignal(cfg)
	if err != nil {
		return nil, err
	}
	return e, nil
}

// makeTurn is Make for a multi-agent id: a TurnEnv (plus
// RecordEpisodeStatistics if asked); MPE needs no TimeLimit (max_cycles).
func (m Maker) makeTurn(id string, opts []Option, o Options) (Env, error) {
	p, fo, err := m.makeParallel(id, opts)
	if err != nil {
		return nil, err
	}
	fo.AgentActionSpaces = o.AgentActionSpaces || fo.ActAs != ""
	t, err := NewTurnEnv(p, fo)
	if err != nil {
		p.Close()
		return nil, fmt.Errorf("env: make %s: %w", id, err)
	}
	if o.EpisodeStatistics {
		return NewRecordEpisodeStatistics(t), nil
	}
	return t, nil
}

// makeFlatVector is MakeVector for a multi-agent id: n is the number of
// ROWS (agent slots), so it must be a multiple of the number of agents;
// n / agents envs are stepped.
func (m Maker) makeFlatVector(id string, n int, opts []Option, o Options) (Vector, error) {
	if m.opens(id) {
		return m.Remote.MakeFlatVector(id, n, o)
	}
	first, fo, err := m.makeParallel(id, opts)
	if err != nil {
		return nil, err
	}
	a := len(first.PossibleAgents())
	if n <= 0 || n%a != 0 {
		first.Close()
		return nil, fmt.Errorf("%w: %s has %d agents; a vector of %d rows is not a whole number of envs (num_envs counts agent rows)", ErrInvalidOption, id, a, n)
	}
	pv, err := NewParallelVector(n/a, func(slot int) (Parallel, error) {
		if slot == 0 {
			return first, nil
		}
		p, _, err := m.makeParallel(id, opts)
		return p, err
	})
	if err != nil {
		return nil, err
	}
	fo.EpisodeStatistics = o.EpisodeStatistics
	fo.AgentActionSpaces = o.AgentActionSpaces || fo.ActAs != ""
	f, err := NewFlatVector(pv, fo)
	if err != nil {
		pv.Close()
		return nil, fmt.Errorf("env: make %s: %w", id, err)
	}
	return f, nil
}

// CheckParallelActions checks a Step's action map against p's Agents and
// action spaces: exactly one action for each agent in the episode, each in
// its space (a Box action must be finite). Errors wrap ErrInvalidAction.
func CheckParallelActions(p Parallel, actions map[string][]float32) error {
	return checkAgentActions(p.Agents(), p.ActionSpace, actions)
}

func checkAgentActions(live []string, space func(string) (Space, error), actions map[string][]float32) error {
	for a := range actions {
		if !slices.Contains(live, a) {
			return fmt.Errorf("%w: action for agent %q, which is not in the episode (agents %v)", ErrInvalidAction, a, live)
		}
	}
	for _, a := range live {
		act, ok := actions[a]
		if !ok {
			return fmt.Errorf("%w: no action for agent %q", ErrInvalidAction, a)
		}
		s, err := space(a)
		if err != nil {
			return err
		}
		if err := CheckAction(s, act); err != nil {
			return fmt.Errorf("agent %s: %w", a, err)
		}
	}
	return nil
}
