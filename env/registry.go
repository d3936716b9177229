package env

import (
	"fmt"
	"strings"

	"herd/env/atari"
	"herd/env/box2d"
	"herd/env/classic"
	"herd/env/minatar"
	"herd/env/probe"
	"herd/env/toy"
)

// Spec is a registered environment: Gymnasium's EnvSpec fields that matter
// here.
type Spec struct {
	// ID is Gymnasium's id, e.g. "CartPole-v1".
	ID string
	// MaxEpisodeSteps is the TimeLimit Make applies (0: none).
	MaxEpisodeSteps int
	// RewardThreshold is the return at which the task counts as solved;
	// valid only if HasRewardThreshold (Pendulum has none).
	RewardThreshold    float64
	HasRewardThreshold bool
	// Kwargs are the keywords this id fixes (LunarLanderContinuous-v3 is
	// LunarLander with continuous=true).
	Kwargs Kwargs

	build func(kw Kwargs) (Env, error)
}

// specs is the registry: a function rather than a package variable, so there
// is no global mutable state; callers get fresh values.
func specs() []Spec {
	return append([]Spec{
		{ID: "CartPole-v0", MaxEpisodeSteps: 200, RewardThreshold: 195, HasRewardThreshold: true, build: buildCartPole},
		{ID: "CartPole-v1", MaxEpisodeSteps: 500, RewardThreshold: 475, HasRewardThreshold: true, build: buildCartPole},
		{ID: "Pendulum-v1", MaxEpisodeSteps: 200, build: buildPendulum},
		// rl-zoo's partially observed variants (MaskVelocityWrapper):
		// the velocity entries are zero, the shapes unchanged.
		{ID: "CartPoleNoVel-v1", MaxEpisodeSteps: 500, RewardThreshold: 475, HasRewardThreshold: true, build: func(kw Kwargs) (Env, error) { return cartPole(kw, true) }},
		{ID: "PendulumNoVel-v1", MaxEpisodeSteps: 200, build: func(kw Kwargs) (Env, error) { return pendulum(kw, true) }},
		{ID: "MountainCar-v0", MaxEpisodeSteps: 200, RewardThreshold: -110, HasRewardThreshold: true, build: buildMountainCar},
		{ID: "MountainCarContinuous-v0", MaxEpisodeSteps: 999, RewardThreshold: 90, HasRewardThreshold: true, build: buildMountainCarContinuous},
		{ID: "Acrobot-v1", MaxEpisodeSteps: 500, RewardThreshold: -100, HasRewardThreshold: true, build: buildAcrobot},
		{ID: "LunarLander-v3", MaxEpisodeSteps: 1000, RewardThreshold: 200, HasRewardThreshold: true, build: buildLunarLander},
		{ID: "LunarLanderContinuous-v3", MaxEpisodeSteps: 1000, RewardThreshold: 200, HasRewardThreshold: true,
			Kwargs: Kwargs{"continuous": true}, build: buildLunarLander},
		{ID: "toy/GoalLine-v0", MaxEpisodeSteps: 20, build: noKwargs("GoalLine", func() Env { return toy.NewGoalLine() })},
	}, append(minAtarSpecs(),
		Spec{ID: "Probe/Bandit-v0", build: noKwargs("Probe/Bandit", func() Env { return probe.NewBandit() })},
		Spec{ID: "Probe/Corridor-v0", MaxEpisodeSteps: 15, build: noKwargs("Probe/Corridor", func() Env { return probe.NewCorridor() })},
	)...)
}

// noKwargs builds an env that takes no keywords.
func noKwargs(name string, build func() Env) func(Kwargs) (Env, error) {
	return func(kw Kwargs) (Env, error) {
		if err := kw.Unused(name, map[string]bool{}); err != nil {
			return nil, err
		}
		return build(), nil
	}
}

// minAtarSpecs registers MinAtar's games as minatar.gym does: MinAtar/Name-v0
// with all six actions, -v1 with the game's minimal action set, no time
// limit (Freeway ends itself after 2,500 frames). Name is the game's name
// title-cased without underscores (space_invaders → SpaceInvaders).
func minAtarSpecs() []Spec {
	var out []Spec
	for _, game := range minatar.Games() {
		var name strings.Builder
		for _, part := range strings.Split(game, "_") {
			name.WriteString(strings.ToUpper(part[:1]) + part[1:])
		}
		for v, minimal := range []bool{false, true} {
			out = append(out, Spec{
				ID:    fmt.Sprintf("MinAtar/%s-v%d", name.String(), v),
				build: func(kw Kwargs) (Env, error) { return buildMinAtar(game, minimal, kw) },
			})
		}
	}
	return out
}

func buildMinAtar(game string, minimal bool, kw Kwargs) (Env, error) {
	used := map[string]bool{}
	cfg := minatar.DefaultConfig(game)
	cfg.MinimalActionSet = minimal
	var err error
	if cfg.StickyActionProb, err = kw.Float("sticky_action_prob", cfg.StickyActionProb, used); err != nil {
		return nil, err
	}
	if cfg.DifficultyRamping, err = kw.Bool("difficulty_ramping", cfg.DifficultyRamping, used); err != nil {
		return nil, err
	}
	if err := kw.Unused("MinAtar "+game, used); err != nil {
		return nil, err
	}
	return minatar.New(cfg)
}

// IDs lists the registered ids in registration order.
func IDs() []string {
	var ids []string
	for _, s := range specs() {
		ids = append(ids, s.ID)
	}
	return ids
}

// SpecOf returns the spec of id, or an error wrapping ErrUnknownID that
// lists the known ids.
func SpecOf(id string) (Spec, error) {
	for _, s := range specs() {
		if s.ID == id {
			return s, nil
		}
	}
	return Spec{}, fmt.Errorf("%w %q; known ids: %s", ErrUnknownID, id, strings.Join(IDs(), ", "))
}

// Option configures Make.
type Option func(*Options)

// Options are the Options of one Make, as an Opener receives them.
type Options struct {
	// MaxEpisodeSteps overrides the spec's time limit (0: the spec's).
	MaxEpisodeSteps int
	NoTimeLimit     bool
	// EpisodeStatistics, StrictActions, AgentActionSpaces: see
	// WithEpisodeStatistics, WithStrictActions, WithAgentActionSpaces.
	EpisodeStatistics bool
	StrictActions     bool
	Kwargs            Kwargs
	StepTime          *StepTime
	AgentActionSpaces bool
}

// ReadOptions applies opts to the zero Options.
func ReadOptions(opts ...Option) Options {
	var o Options
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// WithAgentActionSpaces lets a multi-agent id's agents have different
// action spaces (FlatOptions.AgentActionSpaces): for callers that act for
// each agent with a network of its own space (several policies, through
// SplitVector or TurnEnv.AgentActionSpace). It changes nothing for a
// single-agent id or agents that share one action space.
func WithAgentActionSpaces() Option { return func(o *Options) { o.AgentActionSpaces = true } }

// WithMaxEpisodeSteps overrides the spec's time limit (n > 0).
func WithMaxEpisodeSteps(n int) Option { return func(o *Options) { o.MaxEpisodeSteps = n } }

// WithoutTimeLimit leaves out the TimeLimit wrapper.
func WithoutTimeLimit() Option { return func(o *Options) { o.NoTimeLimit = true } }

// WithEpisodeStatistics adds RecordEpisodeStatistics outside the TimeLimit,
// so Info.Episode reports every finished episode.
func WithEpisodeStatistics() Option { return func(o *Options) { o.EpisodeStatistics = true } }

// WithStrictActions rejects out-of-bounds Box actions (StrictActions)
// instead of letting the env clip them.
func WithStrictActions() Option { return func(o *Options) { o.StrictActions = true } }

// WithStepTime makes every Step take a duration drawn from st (see
// StepTimer), innermost, so the dynamics are exactly those of the env.
func WithStepTime(st StepTime) Option { return func(o *Options) { o.StepTime = &st } }

// WithKwargs passes constructor keywords, as gym.make(id, **kwargs):
// CartPole sutton_barto_reward (bool); Pendulum g (float); MountainCar and
// MountainCarContinuous goal_velocity (float); Acrobot book_or_nips
// ("book"/"nips"); LunarLander continuous (bool), gravity (float),
// enable_wind (bool), wind_power (float), turbulence_power (float); MinAtar
// sticky_action_prob (float), difficulty_ramping (bool). Unknown keywords
// are an error. Several WithKwargs merge, later ones winning.
func WithKwargs(kw Kwargs) Option {
	return func(o *Options) {
		if o.Kwargs == nil {
			o.Kwargs = Kwargs{}
		}
		for k, v := range kw {
			o.Kwargs[k] = v
		}
	}
}

// Make builds the env registered as id, as gym.make does: the env, then
// FlattenObservation if its observations are a Dict, then StrictActions
// if asked, then TimeLimit(spec.MaxEpisodeSteps unless
// overridden or disabled), then RecordEpisodeStatistics if asked.
//
// A multi-agent id (ParallelIDs) gives a TurnEnv. An id WRAPPERS:ID
// (e.g. atari:grpc://HOST:PORT/ALE/Breakout-v5) wraps the single-agent env
// Make(ID) gives in env/atari's image wrappers, the first listed innermost;
// WithEpisodeStatistics then applies to ID inside them, as CleanRL records
// statistics before any Atari wrapper, so returns are the game's
// (unclipped, over all lives). Make is the zero Maker's: remote ids need a
// Maker with a remote Opener.
func Make(id string, opts ...Option) (Env, error) { return Maker{}.Make(id, opts...) }

// Make is env.Make with m's remote ids.
func (m Maker) Make(id string, opts ...Option) (Env, error) {
	o := ReadOptions(opts...)
	if ws, inner, ok, err := atari.SplitID(id); ok {
		if err != nil {
			return nil, err
		}
		return m.makeWrapped(id, ws, inner, opts)
	}
	if m.IsParallel(id) {
		return m.makeTurn(id, opts, o)
	}
	if m.opens(id) {
		return m.Remote.Make(id, o)
	}
	spec, err := m.specOf(id)
	if err != nil {
		return nil, err
	}
	kw := Kwargs{}
	for k, v := range spec.Kwargs {
		kw[k] = v
	}
	for k, v := range o.Kwargs {
		kw[k] = v
	}
	e, err := spec.build(kw)
	if err != nil {
		return nil, fmt.Errorf("env: make %s: %w", id, err)
	}
	if _, ok := e.ObservationSpace().(Dict); ok {
		// Every policy reads flat vectors.
		f, err := NewFlattenObservation(e)
		if err != nil {
			e.Close()
			return nil, fmt.Errorf("env: make %s: %w", id, err)
		}
		e = f
	}
	if o.StepTime != nil {
		st, err := NewStepTimer(e, *o.StepTime)
		if err != nil {
			e.Close()
			return nil, fmt.Errorf("env: make %s: %w", id, err)
		}
		e = st
	}
	if o.StrictActions {
		e = NewStrictActions(e)
	}
	steps := spec.MaxEpisodeSteps
	if o.MaxEpisodeSteps != 0 {
		steps = o.MaxEpisodeSteps
	}
	if !o.NoTimeLimit && steps != 0 {
		tl, err := NewTimeLimit(e, steps)
		if err != nil {
			e.Close()
			return nil, fmt.Errorf("env: make %s: %w", id, err)
		}
		e = tl
	}
	if o.EpisodeStatistics {
		e = NewRecordEpisodeStatistics(e)
	}
	return e, nil
}

func buildCartPole(kw Kwargs) (Env, error) { return cartPole(kw, false) }

func buildPendulum(kw Kwargs) (Env, error) { return pendulum(kw, false) }

func cartPole(kw Kwargs, noVel bool) (Env, error) {
	used := map[string]bool{}
	sb, err := kw.Bool("sutton_barto_reward", false, used)
	if err != nil {
		return nil, err
	}
	if err := kw.Unused("CartPole", used); err != nil {
		return nil, err
	}
	return classic.NewCartPole(classic.CartPoleConfig{SuttonBartoReward: sb, NoVel: noVel}), nil
}

func pendulum(kw Kwargs, noVel bool) (Env, error) {
	used := map[string]bool{}
	g, err := kw.Float("g", 10.0, used)
	if err != nil {
		return nil, err
	}
	if err := kw.Unused("Pendulum", used); err != nil {
		return nil, err
	}
	if g == 0 {
		return nil, fmt.Errorf("%w: Pendulum g = 0 is not supported", ErrInvalidOption)
	}
	return classic.NewPendulum(classic.PendulumConfig{G: g, NoVel: noVel}), nil
}

func mountainCarConfig(kw Kwargs, name string) (classic.MountainCarConfig, error) {
	used := map[string]bool{}
	gv, err := kw.Float("goal_velocity", 0, used)
	if err != nil {
		return classic.MountainCarConfig{}, err
	}
	return classic.MountainCarConfig{GoalVelocity: gv}, kw.Unused(name, used)
}

func buildMountainCar(kw Kwargs) (Env, error) {
	cfg, err := mountainCarConfig(kw, "MountainCar")
	if err != nil {
		return nil, err
	}
	return classic.NewMountainCar(cfg), nil
}

func buildMountainCarContinuous(kw Kwargs) (Env, error) {
	cfg, err := mountainCarConfig(kw, "MountainCarContinuous")
	if err != nil {
		return nil, err
	}
	return classic.NewMountainCarContinuous(cfg), nil
}

func buildAcrobot(kw Kwargs) (Env, error) {
	used := map[string]bool{}
	bn, err := kw.String("book_or_nips", "book", used)
	if err != nil {
		return nil, err
	}
	if err := kw.Unused("Acrobot", used); err != nil {
		return nil, err
	}
	return classic.NewAcrobot(classic.AcrobotConfig{BookOrNips: bn})
}

func buildLunarLander(kw Kwargs) (Env, error) {
	used := map[string]bool{}
	var cfg box2d.LunarLanderConfig
	var err error
	get := func(f func() error) {
		if err == nil {
			err = f()
		}
	}
	get(func() (e error) { cfg.Continuous, e = kw.Bool("continuous", false, used); return })
	get(func() (e error) { cfg.Gravity, e = kw.Float("gravity", -10.0, used); return })
	get(func() (e error) { cfg.EnableWind, e = kw.Bool("enable_wind", false, used); return })
	get(func() (e error) { cfg.WindPower, e = kw.Float("wind_power", 15.0, used); return })
	get(func() (e error) { cfg.TurbulencePower, e = kw.Float("turbulence_power", 1.5, used); return })
	get(func() error { return kw.Unused("LunarLander", used) })
	if err != nil {
		return nil, err
	}
	l, err := box2d.NewLunarLander(cfg)
	if err != nil {
		return nil, err
	}
	return l, nil
}

// makeWrapped is Make for an id with a wrapper list.
func (m Maker) makeWrapped(id string, ws []atari.Wrapper, inner string, opts []Option) (Env, error) {
	if m.IsParallel(inner) {
		return nil, fmt.Errorf("%w: env %s: image wrappers apply to single-agent envs, %s is multi-agent", ErrInvalidOption, id, inner)
	}
	e, err := m.Make(inner, opts...)
	if err != nil {
		return nil, err
	}
	w, err := atari.Apply(e, ws)
	if err != nil {
		e.Close()
		return nil, fmt.Errorf("env: make %s: %w", id, err)
	}
	return w, nil
}
