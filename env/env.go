package env

import "herd/env/internal/core"

// Env is one environment with Gymnasium's semantics: Reset(seed) → (obs,
// info), Step(action) → (obs, reward, terminated, truncated, info), Close.
//
// An Env is not safe for concurrent use; one goroutine owns it. Observation
// slices it returns are owned by the env and valid until the next Reset or
// Step. Actions use the flat []float32 encoding described in the package
// documentation ("Actions"). Step returns ErrInvalidAction for a bad action
// and ErrNeedsReset before the first Reset or after an episode ended.
type Env = core.Env

// Info is the per-step info (Gymnasium's info dict) as a plain value.
type Info = core.Info

// EpisodeStats is the return and length of a finished episode, reported by
// RecordEpisodeStatistics in Info.Episode.
type EpisodeStats = core.EpisodeStats

// Wrapper is an Env that wraps another; Unwrap returns the inner env.
type Wrapper = core.Wrapper

// Stater is implemented by envs whose internal float64 state can be read and
// written, as Python users do through env.unwrapped.state:
//
//	st := env.Unwrapped(e).(env.Stater)
//	s := st.StateTo(nil)          // CartPole: [x, ẋ, θ, θ̇]
//	obs, err := st.SetState(s)    // next Step advances from s
type Stater = core.Stater

// Snapshotter is implemented by envs whose whole state, random stream
// included, can be saved and restored exactly (the classic control envs,
// MinAtar, and MPE's multi-agent envs, which a FlatVector saves row by row
// as a VectorSnapshotter): training checkpoints use it so that a resumed
// run continues the same episodes. Reach it through
// env.Unwrapped(e).(env.Snapshotter).
type Snapshotter = core.Snapshotter

// Space describes observations or actions and their float32 encoding.
type Space = core.Space

// Discrete is {Start, …, Start+N−1}; an element is encoded as one float32
// holding the integer.
type Discrete = core.Discrete

// Box is a float32 vector with per-coordinate bounds (possibly infinite).
type Box = core.Box

// MultiDiscrete is a vector of Discrete values {0, …, Nvec[i]−1}.
type MultiDiscrete = core.MultiDiscrete

// Kwargs are Gymnasium-style constructor keywords, passed with WithKwargs.
type Kwargs = core.Kwargs

// NoSeed passed to Reset continues the env's random stream instead of
// reseeding it (Gymnasium's reset(seed=None)).
const NoSeed = core.NoSeed

// Sentinel errors; match with errors.Is.
var (
	ErrInvalidAction = core.ErrInvalidAction
	ErrNeedsReset    = core.ErrNeedsReset
	ErrUnknownID     = core.ErrUnknownID
	ErrInvalidOption = core.ErrInvalidOption
	ErrInvalidState  = core.ErrInvalidState
	ErrClosed        = core.ErrClosed
)

// NewBox returns a Box with bounds low, high and an optional shape (flat if
// omitted).
func NewBox(low, high []float32, shape ...int) (Box, error) { return core.NewBox(low, high, shape...) }

// UniformBox returns a flat Box of n values, all in [low, high].
func UniformBox(low, high float32, n int) Box { return core.UniformBox(low, high, n) }

// CheckAction returns nil if a is a valid action for s, else an error
// wrapping ErrInvalidAction. For a Box it checks length and finiteness only
// (see Box.Check for why not the bounds).
func CheckAction(s Space, a []float32) error { return core.CheckAction(s, a) }

// Unwrapped follows Unwrap until it reaches the innermost env (Gymnasium's
// env.unwrapped).
func Unwrapped(e Env) Env {
	for {
		w, ok := e.(Wrapper)
		if !ok {
			return e
		}
		e = w.Unwrap()
	}
}
