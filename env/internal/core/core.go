// Package core holds the types shared by package env and the environment
// implementations (env/classic, env/box2d). It exists only to break the import
// cycle that env.Make would otherwise create (env's registry constructs
// classic and box2d envs, which in turn need env's types); package env
// re-exports every name here as an alias, so users never import core.
package core

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"herd/internal/rng"
)

// Sentinel errors. Check them with errors.Is; the returned errors wrap them
// with what went wrong and where.
var (
	// ErrInvalidAction: an action outside the action space, of the wrong
	// length, or not finite.
	ErrInvalidAction = errors.New("env: invalid action")
	// ErrNeedsReset: Step before the first Reset, or after a step that
	// returned terminated or truncated.
	ErrNeedsReset = errors.New("env: reset needed")
	// ErrUnknownID: env.Make or env.SpecOf got an id that is not registered.
	ErrUnknownID = errors.New("env: unknown id")
	// ErrInvalidOption: a constructor argument or keyword is unknown or out
	// of range.
	ErrInvalidOption = errors.New("env: invalid option")
	// ErrInvalidState: SetState got a state of the wrong length or with
	// non-finite values.
	ErrInvalidState = errors.New("env: invalid state")
	// ErrClosed: a call on a closed env or vector env.
	ErrClosed = errors.New("env: closed")
)

// NoSeed passed to Reset keeps the env's random stream going instead of
// reseeding it (Gymnasium's reset(seed=None)).
const NoSeed int64 = -1

// Env is one environment with Gymnasium's semantics.
//
// An Env is not safe for concurrent use; one goroutine owns it. Slices it
// returns (observations) are owned by the env and stay valid until the next
// Reset or Step; copy them to keep them. This is what makes stepping
// allocation-free.
//
// Actions are passed as a []float32 whose encoding depends on the action
// space (see Space.Dim): a Discrete action is one value holding the integer
// index, a Box action is the flat row-major vector, a MultiDiscrete action is
// one integer per dimension. The caller owns the slice; Step does not keep it.
type Env interface {
	// ObservationSpace is the space observations belong to.
	ObservationSpace() Space
	// ActionSpace is the space actions must belong to.
	ActionSpace() Space
	// Reset starts a new episode. seed ≥ 0 reseeds the env's random stream
	// (derived with internal/rng, so the same seed gives the same episode);
	// NoSeed (any negative value) continues the current stream; an env that
	// was never seeded behaves as if seeded with 0.
	Reset(seed int64) (obs []float32, info Info, err error)
	// Step advances one step. It returns ErrInvalidAction for a bad action
	// and ErrNeedsReset before the first Reset or after the episode ended.
	Step(action []float32) (obs []float32, reward float64, terminated, truncated bool, info Info, err error)
	// Close releases resources; further calls return ErrClosed.
	Close() error
}

// Info is the per-step information dictionary. It is a plain value so that
// returning it costs no allocation.
type Info struct {
	// HasEpisode is true on the step that ended an episode when a
	// RecordEpisodeStatistics wrapper is present; Episode is then valid.
	HasEpisode bool
	// Episode holds the finished episode's undiscounted return and length.
	Episode EpisodeStats
	// ActionMask, when not nil, marks the legal actions of a Discrete
	// action space for the next step (PettingZoo's info["action_mask"]):
	// ActionMask[k] is action Start + k. A multi-agent env sets it in the
	// info of each agent whose next action is constrained.
	ActionMask []bool
	// Lives, when HasLives, is the number of lives the agent has left
	// (ALE's info["lives"], ale.lives()); env/atari's EpisodicLife reads it.
	Lives    int
	HasLives bool
}

// EpisodeStats is what RecordEpisodeStatistics reports at the end of an
// episode (Gymnasium's info["episode"]["r"] and ["l"]).
type EpisodeStats struct {
	Return float64 `json:"r"`
	Length int     `json:"l"`
}

// Wrapper is implemented by envs that wrap another env.
type Wrapper interface {
	Env
	// Unwrap returns the wrapped env.
	Unwrap() Env
}

// Stater is implemented by envs whose internal state can be read and set:
// the Go counterpart of Python's env.unwrapped.state. Reach it through
// env.Unwrapped(e).(env.Stater).
type Stater interface {
	// StateTo writes the internal float64 state into dst (resized as
	// needed) and returns it.
	StateTo(dst []float64) []float64
	// SetState replaces the internal state and marks the episode as running,
	// so that the next Step advances from s. The observation of the new
	// state is returned.
	SetState(s []float64) ([]float32, error)
}

// Snapshotter is implemented by envs whose whole state (the physical state,
// the random stream, whether an episode is running) can be saved and
// restored exactly, so that a resumed training run continues the same
// episodes bit for bit. An env without it restarts its episodes on resume.
type Snapshotter interface {
	// MarshalState returns the env's whole state.
	MarshalState() ([]byte, error)
	// UnmarshalState restores a state MarshalState returned (from an env
	// made with the same config).
	UnmarshalState(b []byte) error
}

// Space describes a set of observations or actions, and how an element is
// encoded as float32 values.
type Space interface {
	// Dim is how many float32 values encode one element.
	Dim() int
	// Shape is the element's shape (Gymnasium's space.shape); the product
	// of Shape is Dim, except Discrete whose Shape is empty and Dim 1.
	Shape() []int
	// Contains reports whether x encodes an element of the space.
	Contains(x []float32) bool
	// SampleTo writes a random element drawn with r into dst (resized as
	// needed) and returns it.
	SampleTo(dst []float32, r *rand.Rand) []float32
	String() string
}

// Discrete is {Start, Start+1, …, Start+N−1}, encoded as one float32 holding
// the integer (exact for |values| < 2^24).
type Discrete struct {
	N     int
	Start int
}

func (d Discrete) Dim() int       { return 1 }
func (d Discrete) Shape() []int   { return nil }
func (d Discrete) String() string { return fmt.Sprintf("Discrete(%d, start=%d)", d.N, d.Start) }

// Contains reports whether x is one integral value in range.
func (d Discrete) Contains(x []float32) bool { return len(x) == 1 && d.containsValue(x[0]) }

func (d Discrete) containsValue(v float32) bool {
	f := float64(v)
	return f == math.Trunc(f) && f >= float64(d.Start) && f < float64(d.Start+d.N)
}

// SampleTo draws uniformly.
func (d Discrete) SampleTo(dst []float32, r *rand.Rand) []float32 {
	dst = resize32(dst, 1)
	dst[0] = float32(d.Start + r.IntN(d.N))
	return dst
}

// Index returns the action index encoded in a, or an error wrapping
// ErrInvalidAction.
func (d Discrete) Index(a []float32) (int, error) {
	if len(a) != 1 {
		return 0, fmt.Errorf("%w: %v wants 1 value, got %d", ErrInvalidAction, d, len(a))
	}
	if !d.containsValue(a[0]) {
		return 0, fmt.Errorf("%w: %v not in %v", ErrInvalidAction, a[0], d)
	}
	return int(a[0]), nil
}

// Box is the set of float32 vectors x with Low[i] ≤ x[i] ≤ High[i]; bounds
// may be ±Inf. Low and High are flat (row-major) and have Dim elements.
type Box struct {
	Low, High []float32
	// Dims is the shape; nil means the flat shape [len(Low)].
	Dims []int
}

// NewBox returns a Box with the given bounds and shape; a nil shape means
// flat.
func NewBox(low, high []float32, shape ...int) (Box, error) {
	if len(low) != len(high) {
		return Box{}, fmt.Errorf("%w: box low has %d values, high %d", ErrInvalidOption, len(low), len(high))
	}
	n := 1
	for _, s := range shape {
		n *= s
	}
	if len(shape) > 0 && n != len(low) {
		return Box{}, fmt.Errorf("%w: box shape %v holds %d values, bounds have %d", ErrInvalidOption, shape, n, len(low))
	}
	for i := range low {
		if math.IsNaN(float64(low[i])) || math.IsNaN(float64(high[i])) || low[i] > high[i] {
			return Box{}, fmt.Errorf("%w: box bound %d is [%v, %v]", ErrInvalidOption, i, low[i], high[i])
		}
	}
	return Box{Low: low, High: high, Dims: shape}, nil
}

// UniformBox is NewBox with the same scalar bounds for all n values.
func UniformBox(low, high float32, n int) Box {
	l, h := make([]float32, n), make([]float32, n)
	for i := range l {
		l[i], h[i] = low, high
	}
	return Box{Low: l, High: h}
}

func (b Box) Dim() int { return len(b.Low) }

func (b Box) Shape() []int {
	if b.Dims == nil {
		return []int{len(b.Low)}
	}
	return b.Dims
}

func (b Box) String() string {
	return fmt.Sprintf("Box(%v, %v, %v)", b.Low, b.High, b.Shape())
}

// Contains reports whether x has Dim values, each within its bounds.
func (b Box) Contains(x []float32) bool {
	if len(x) != len(b.Low) {
		return false
	}
	for i, v := range x {
		if !(v >= b.Low[i] && v <= b.High[i]) { // also false for NaN
			return false
		}
	}
	return true
}

// SampleTo follows Gymnasium's Box.sample: uniform on bounded coordinates,
// exponential shifted from the finite bound on half-bounded ones, normal on
// unbounded ones.
func (b Box) SampleTo(dst []float32, r *rand.Rand) []float32 {
	dst = resize32(dst, len(b.Low))
	for i := range dst {
		lo, hi := float64(b.Low[i]), float64(b.High[i])
		loInf, hiInf := math.IsInf(lo, -1), math.IsInf(hi, 1)
		switch {
		case !loInf && !hiInf:
			dst[i] = float32(lo + (hi-lo)*r.Float64())
		case loInf && hiInf:
			dst[i] = float32(r.NormFloat64())
		case loInf:
			dst[i] = float32(hi - r.ExpFloat64())
		default:
			dst[i] = float32(lo + r.ExpFloat64())
		}
	}
	return dst
}

// Check returns an error wrapping ErrInvalidAction unless a has Dim finite
// values. Values outside the bounds pass: Gymnasium's continuous envs clip
// such actions themselves (and MountainCarContinuous even penalises the
// unclipped value), so rejecting them would change the dynamics. Use
// CheckBounds for the strict test.
func (b Box) Check(a []float32) error {
	if len(a) != len(b.Low) {
		return fmt.Errorf("%w: %v wants %d values, got %d", ErrInvalidAction, b, len(b.Low), len(a))
	}
	for i, v := range a {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return fmt.Errorf("%w: action[%d] = %v is not finite", ErrInvalidAction, i, v)
		}
	}
	return nil
}

// CheckBounds is Check plus the bounds.
func (b Box) CheckBounds(a []float32) error {
	if err := b.Check(a); err != nil {
		return err
	}
	for i, v := range a {
		if v < b.Low[i] || v > b.High[i] {
			return fmt.Errorf("%w: action[%d] = %v outside [%v, %v]", ErrInvalidAction, i, v, b.Low[i], b.High[i])
		}
	}
	return nil
}

// MultiDiscrete is a vector of independent Discrete values with starts 0:
// element i is in {0, …, Nvec[i]−1}. Encoded as one float32 per dimension.
type MultiDiscrete struct {
	Nvec []int
}

func (m MultiDiscrete) Dim() int       { return len(m.Nvec) }
func (m MultiDiscrete) Shape() []int   { return []int{len(m.Nvec)} }
func (m MultiDiscrete) String() string { return fmt.Sprintf("MultiDiscrete(%v)", m.Nvec) }

// Contains reports whether x has one integral in-range value per dimension.
func (m MultiDiscrete) Contains(x []float32) bool {
	if len(x) != len(m.Nvec) {
		return false
	}
	for i, v := range x {
		if !(Discrete{N: m.Nvec[i]}).containsValue(v) {
			return false
		}
	}
	return true
}

// SampleTo draws each dimension uniformly.
func (m MultiDiscrete) SampleTo(dst []float32, r *rand.Rand) []float32 {
	dst = resize32(dst, len(m.Nvec))
	for i, n := range m.Nvec {
		dst[i] = float32(r.IntN(n))
	}
	return dst
}

// CheckAction returns nil if a is a valid action for s, else an error
// wrapping ErrInvalidAction. Box actions are checked with Box.Check (length
// and finiteness, not bounds).
func CheckAction(s Space, a []float32) error {
	switch sp := s.(type) {
	case Discrete:
		_, err := sp.Index(a)
		return err
	case Box:
		return sp.Check(a)
	default:
		if len(a) != s.Dim() {
			return fmt.Errorf("%w: %v wants %d values, got %d", ErrInvalidAction, s, s.Dim(), len(a))
		}
		if !s.Contains(a) {
			return fmt.Errorf("%w: %v not in %v", ErrInvalidAction, a, s)
		}
		return nil
	}
}

// CheckState returns an error wrapping ErrInvalidState unless s has n finite
// values.
func CheckState(name string, s []float64, n int) error {
	if len(s) != n {
		return fmt.Errorf("%w: %s state has %d values, want %d", ErrInvalidState, name, len(s), n)
	}
	for i, v := range s {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%w: %s state[%d] = %v", ErrInvalidState, name, i, v)
		}
	}
	return nil
}

// Kwargs are Gymnasium-style keyword arguments for env constructors
// (gym.make("Pendulum-v1", g=9.81)). Values are float64, int, bool or string.
type Kwargs map[string]any

// Float returns kwargs[name] as a float64 (ints are converted), def if
// absent, and marks the name used.
func (k Kwargs) Float(name string, def float64, used map[string]bool) (float64, error) {
	used[name] = true
	v, ok := k[name]
	if !ok {
		return def, nil
	}
	switch x := v.(type) {
	case float64:
		return x, nil
	case float32:
		return float64(x), nil
	case int:
		return float64(x), nil
	case int64: // what some YAML and JSON decoders produce
		return float64(x), nil
	case uint64:
		return float64(x), nil
	}
	return 0, fmt.Errorf("%w: %s = %v (%T), want a number", ErrInvalidOption, name, v, v)
}

// Bool returns kwargs[name] as a bool.
func (k Kwargs) Bool(name string, def bool, used map[string]bool) (bool, error) {
	used[name] = true
	v, ok := k[name]
	if !ok {
		return def, nil
	}
	if b, ok := v.(bool); ok {
		return b, nil
	}
	return false, fmt.Errorf("%w: %s = %v (%T), want a bool", ErrInvalidOption, name, v, v)
}

// String returns kwargs[name] as a string.
func (k Kwargs) String(name string, def string, used map[string]bool) (string, error) {
	used[name] = true
	v, ok := k[name]
	if !ok {
		return def, nil
	}
	if s, ok := v.(string); ok {
		return s, nil
	}
	return "", fmt.Errorf("%w: %s = %v (%T), want a string", ErrInvalidOption, name, v, v)
}

// Unused returns an error naming every keyword not in used.
func (k Kwargs) Unused(id string, used map[string]bool) error {
	var bad []string
	for name := range k {
		if !used[name] {
			bad = append(bad, name)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	slices.Sort(bad)
	return fmt.Errorf("%w: %s does not take %s", ErrInvalidOption, id, strings.Join(bad, ", "))
}

func resize32(dst []float32, n int) []float32 {
	if cap(dst) < n {
		return make([]float32, n)
	}
	return dst[:n]
}

// RNG is an env's random stream, Gymnasium's np_random: reseeded by
// Reset(seed ≥ 0) from internal/rng's (seed, "env", 0) stream, continued by
// Reset(NoSeed). The zero value is ready; it seeds itself with 0 on first use.
type RNG struct {
	pcg    rand.PCG
	r      *rand.Rand
	seeded bool
}

// Reset reseeds for seed ≥ 0 (or on first use) and returns the generator.
func (g *RNG) Reset(seed int64) *rand.Rand {
	if g.r == nil {
		g.r = rand.New(&g.pcg)
	}
	if seed >= 0 || !g.seeded {
		g.pcg = *rng.Source(uint64(max(seed, 0)), "env", 0)
		g.seeded = true
	}
	return g.r
}

// MarshalBinary returns the generator's state and whether it was seeded.
func (g *RNG) MarshalBinary() ([]byte, error) {
	b, err := g.pcg.MarshalBinary()
	if err != nil {
		return nil, err
	}
	seeded := byte(0)
	if g.seeded {
		seeded = 1
	}
	return append([]byte{seeded}, b...), nil
}

// UnmarshalBinary restores a state MarshalBinary returned.
func (g *RNG) UnmarshalBinary(b []byte) error {
	if len(b) < 1 || b[0] > 1 {
		return fmt.Errorf("core: RNG state of %d bytes is malformed", len(b))
	}
	if err := g.pcg.UnmarshalBinary(b[1:]); err != nil {
		return fmt.Errorf("core: RNG state: %w", err)
	}
	if g.r == nil {
		g.r = rand.New(&g.pcg)
	}
	g.seeded = b[0] == 1
	return nil
}

// Rand returns the generator, seeding it with 0 if it never was.
func (g *RNG) Rand() *rand.Rand {
	if !g.seeded {
		return g.Reset(0)
	}
	return g.r
}

// Episode is the bookkeeping every env written in Go shares: whether Step
// is allowed (after Reset, before the episode terminated) and whether the
// env is closed. Name is the env's, for the errors.
type Episode struct {
	Name    string
	Running bool
	Closed  bool
}

// CheckStep reports a Step the env cannot take: closed, never reset, or
// after its episode terminated.
func (e *Episode) CheckStep() error {
	if e.Closed {
		return fmt.Errorf("%w: %s.Step", ErrClosed, e.Name)
	}
	if !e.Running {
		return fmt.Errorf("%w: %s.Step before Reset or after the episode terminated", ErrNeedsReset, e.Name)
	}
	return nil
}

// CheckReset reports a Reset of a closed env, and otherwise starts an
// episode.
func (e *Episode) CheckReset() error {
	if e.Closed {
		return fmt.Errorf("%w: %s.Reset", ErrClosed, e.Name)
	}
	e.Running = true
	return nil
}

// Close marks the env closed: every later Step and Reset fails.
func (e *Episode) Close() error {
	e.Closed = true
	e.Running = false
	return nil
}
