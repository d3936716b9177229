package minatar

import (
	"fmt"
	"math"
	"math/bits"

	"herd/env/internal/core"
	"herd/env/minatar/internal/nprand"
)

// The six actions every game accepts, in MinAtar's order.
const (
	actNoop = iota
	actLeft
	actUp
	actRight
	actDown
	actFire
	numActions
)

// size is the side of the square grid.
const size = 10

// game is one MinAtar game: its rules, without the sticky actions and the
// random stream that Env adds.
type game interface {
	// reset starts a new episode, drawing from rs as the game does.
	reset(rs *nprand.RandomState)
	// act advances one frame with a full-set action (actNoop … actFire).
	act(a int, rs *nprand.RandomState) (reward int, terminal bool)
	// observe draws the observation into f, which is zero.
	observe(f *frame)
	channels() int
	minimalActions() []int
	// ramp is the difficulty level, −1 for games without ramping.
	ramp() int
	// state codes the game's state (snapshot.go); clone copies the game
	// for state to decode into.
	state(c *codec)
	clone() game
}

// Games lists the game names New accepts, in MinAtar's order.
func Games() []string {
	return []string{"asterix", "breakout", "freeway", "seaquest", "space_invaders"}
}

// Config selects a game and MinAtar's Environment options.
type Config struct {
	// Game is one of Games().
	Game string
	// MinimalActionSet gives the game's minimal action set (the -v1 ids)
	// instead of all six actions (-v0).
	MinimalActionSet bool
	// StickyActionProb is the probability that a step repeats the previous
	// action instead of the chosen one; MinAtar's default is 0.1.
	StickyActionProb float64
	// DifficultyRamping makes Asterix, Seaquest and SpaceInvaders harder as
	// the episode goes on, as in MinAtar (its default, true).
	DifficultyRamping bool
}

// DefaultConfig is MinAtar's Environment defaults for game: sticky action
// probability 0.1, difficulty ramping on, all six actions.
func DefaultConfig(game string) Config {
	return Config{Game: game, StickyActionProb: 0.1, DifficultyRamping: true}
}

// Env is one MinAtar game behind MinAtar's Environment wrapper (sticky
// actions, one shared random stream) with the Gymnasium interface of
// minatar.gym.BaseEnv. Observation: Box [10, 10, C] of 0/1 float32,
// row-major (row, column, channel) as MinAtar's state(). Action:
// Discrete(6) or Discrete(len(minimal set)).
type Env struct {
	cfg       Config
	g         game
	rs        nprand.RandomState
	seeded    bool
	last      int // previous full-set action, for sticky actions
	actionSet []int
	running   bool
	closed    bool
	obs       []float32
	frames    [2]frame // frames[shown] is what obs holds
	shown     int
	obsSpace  core.Box
	actSpace  core.Discrete
}

// New returns the game cfg names; call Reset before Step.
func New(cfg Config) (*Env, error) {
	var g game
	switch cfg.Game {
	case "breakout":
		g = &breakout{}
	case "asterix":
		g = &asterix{ramping: cfg.DifficultyRamping}
	case "freeway":
		g = &freeway{}
	case "space_invaders":
		g = &spaceInvaders{ramping: cfg.DifficultyRamping}
	case "seaquest":
		g = &seaquest{ramping: cfg.DifficultyRamping}
	default:
		return nil, fmt.Errorf("%w: MinAtar game %q, want one of %v", core.ErrInvalidOption, cfg.Game, Games())
	}
	p := cfg.StickyActionProb
	if math.IsNaN(p) || p < 0 || p > 1 {
		return nil, fmt.Errorf("%w: MinAtar sticky_action_prob %v, want in [0, 1]", core.ErrInvalidOption, p)
	}
	e := &Env{cfg: cfg, g: g}
	if cfg.MinimalActionSet {
		e.actionSet = g.minimalActions()
	} else {
		e.actionSet = []int{actNoop, actLeft, actUp, actRight, actDown, actFire}
	}
	c := g.channels()
	e.obs = make([]float32, size*size*c)
	low, high := make([]float32, len(e.obs)), make([]float32, len(e.obs))
	for i := range high {
		high[i] = 1
	}
	e.obsSpace = core.Box{Low: low, High: high, Dims: []int{size, size, c}}
	e.actSpace = core.Discrete{N: len(e.actionSet)}
	return e, nil
}

func (e *Env) ObservationSpace() core.Space { return e.obsSpace }
func (e *Env) ActionSpace() core.Space      { return e.actSpace }

// Config returns the configuration the env was built with.
func (e *Env) Config() Config { return e.cfg }

// ActionSet maps this env's action indices to MinAtar's six actions
// (0 no-op, 1 left, 2 up, 3 right, 4 down, 5 fire).
func (e *Env) ActionSet() []int { return append([]int(nil), e.actionSet...) }

// DifficultyRamp is the game's difficulty level (MinAtar's
// difficulty_ramp()), −1 for Breakout and Freeway, which do not ramp.
func (e *Env) DifficultyRamp() int { return e.g.ramp() }

// Close ends the env; further calls return ErrClosed.
func (e *Env) Close() error {
	e.closed, e.running = true, false
	return nil
}

// Reset starts an episode. A seed ≥ 0 reseeds the stream as NumPy's
// RandomState(seed) for seeds below 2³² (MinAtar's env.seed(seed)), and as
// RandomState([seed mod 2³², seed >> 32]) above; NoSeed continues the
// stream; an env never seeded starts from RandomState(0). As in MinAtar,
// the previous action (which a sticky step repeats) is kept across
// episodes and reseeding.
func (e *Env) Reset(seed int64) ([]float32, core.Info, error) {
	if e.closed {
		return nil, core.Info{}, fmt.Errorf("%w: MinAtar %s Reset", core.ErrClosed, e.cfg.Game)
	}
	if seed >= 0 || !e.seeded {
		s := uint64(max(seed, 0))
		if s <= math.MaxUint32 {
			e.rs.Seed(uint32(s))
		} else {
			e.rs.SeedArray([]uint32{uint32(s), uint32(s >> 32)})
		}
		e.seeded = true
	}
	e.g.reset(&e.rs)
	e.running = true
	return e.observe(), core.Info{}, nil
}

// Step plays one frame: with probability StickyActionProb (one Rand draw
// every step) the previous action replaces the chosen one.
func (e *Env) Step(action []float32) ([]float32, float64, bool, bool, core.Info, error) {
	if e.closed {
		return nil, 0, false, false, core.Info{}, fmt.Errorf("%w: MinAtar %s Step", core.ErrClosed, e.cfg.Game)
	}
	if !e.running {
		return nil, 0, false, false, core.Info{}, fmt.Errorf("%w: MinAtar %s Step before Reset or after the episode terminated", core.ErrNeedsReset, e.cfg.Game)
	}
	i, err := e.actSpace.Index(action)
	if err != nil {
		return nil, 0, false, false, core.Info{}, err
	}
	a := e.actionSet[i]
	if e.rs.Rand() < e.cfg.StickyActionProb {
		a = e.last
	}
	e.last = a
	r, term := e.g.act(a, &e.rs)
	if term {
		e.running = false
	}
	return e.observe(), float64(r), term, false, core.Info{}, nil
}

// observe draws the game into a frame and writes into obs only the cells
// that differ from the frame obs holds: a frame changes in a handful of
// cells, and rewriting all 100·C floats would cost more than the game.
func (e *Env) observe() []float32 {
	old, next := &e.frames[e.shown], &e.frames[e.shown^1]
	nc := e.g.channels()
	for c := range nc {
		next[c] = plane{}
	}
	e.g.observe(next)
	obs := e.obs[:size*size*nc]
	for c := range nc {
		for w := range 2 {
			word := next[c][w]
			d := word ^ old[c][w]
			for d != 0 {
				b := bits.TrailingZeros64(d)
				d &= d - 1
				obs[(w*64+b)*nc+c] = float32(word >> b & 1)
			}
		}
	}
	e.shown ^= 1
	return e.obs
}

// frame is an observation as bits, one plane per channel.
type frame [maxChannels]plane

const maxChannels = 10

// plane is one channel: bit i (of the 128) is cell i = 10·row + column.
type plane [2]uint64

func (f *frame) set(y, x, c int) {
	i := uint(y*size + x)
	f[c][i>>6&1] |= 1 << (i & 63)
}

// setGrid copies a whole grid into channel c.
func (f *frame) setGrid(c int, g *grid) {
	var lo, hi uint64
	for y := range 6 { // rows 0–5: bits 0–59
		lo |= uint64(g[y]) << (y * size)
	}
	r6 := uint64(g[6]) // bits 60–69 straddle the words
	lo |= r6 << 60
	hi = r6 >> 4
	for y := 7; y < size; y++ { // rows 7–9: bits 70–99
		hi |= uint64(g[y]) << (y*size - 64)
	}
	f[c] = plane{lo, hi}
}

// grid is a 10×10 map as bits, row by row: bit x of grid[y] is cell (y, x).
type grid [size]uint16

const rowMask = 1<<size - 1

var _ core.Env = (*Env)(nil)
