package env

import (
	"fmt"

	"herd/env/atari"
	"herd/internal/rng"
)

// Vector steps N copies of an env as one batch (Gymnasium's VectorEnv).
//
// # Autoreset convention: same step
//
// When env i's episode ends in Step (terminated or truncated), the vector
// resets env i at once, in the same call. The returned Batch then holds, for
// row i:
//
//   - Obs row i: the first observation of the NEW episode (what the policy
//     acts on next);
//   - FinalObs row i: the TRUE last observation of the episode that ended
//     (what a critic bootstraps from on truncation);
//   - Rewards[i], Terminated[i], Truncated[i], Infos[i]: those of the final
//     transition.
//
// FinalObs rows are written only for envs whose episode ended, so each
// observation is copied exactly once into a batch buffer. This is
// Gymnasium's SAME_STEP mode (the 0.26–0.29 default, where the final
// observation sat in info["final_observation"]).
//
// The Batch and its slices are owned by the vector and overwritten by the
// next Reset or Step; no call allocates in steady state.
//
// # Seeding
//
// Reset(seed ≥ 0) resets env i with the seed rng.Derive(seed, "env/vector",
// i) (made non-negative), so one seed fixes every env; automatic resets
// continue each env's stream. Reset(NoSeed) continues all streams.
//
// # Errors
//
// Step checks every action before stepping any env, so an invalid action
// (ErrInvalidAction) leaves all envs untouched. An error from an env in the
// middle of a step leaves the batch partly advanced; call Reset.
type Vector interface {
	// NumEnvs is N.
	NumEnvs() int
	// ObservationSpace and ActionSpace are those of ONE env; the batch
	// holds N rows of ObservationSpace().Dim() values.
	ObservationSpace() Space
	ActionSpace() Space
	// Reset resets all envs (see Seeding); only Batch.Obs is meaningful.
	Reset(seed int64) (*Batch, error)
	// Step takes N·ActionSpace().Dim() action values, row i for env i.
	Step(actions []float32) (*Batch, error)
	// Close closes all envs (and stops the workers of an AsyncVector).
	Close() error
}

// Batch is the result of a vector Reset or Step. Row i of a flat slice is
// [i·ObsDim, (i+1)·ObsDim).
type Batch struct {
	// ObsDim is the number of float32 values per observation.
	ObsDim int
	// Obs holds N observations to act on next (reset observations for envs
	// whose episode just ended).
	Obs []float32
	// Rewards, Terminated, Truncated and Infos describe the transition each
	// env just made.
	Rewards    []float32
	Terminated []bool
	Truncated  []bool
	Infos      []Info
	// FinalObs row i is the true last observation of env i's ended episode;
	// valid only where Done(i).
	FinalObs []float32
}

// Done reports whether env i's episode ended in this step.
func (b *Batch) Done(i int) bool { return b.Terminated[i] || b.Truncated[i] }

// ObsRow returns row i of Obs (a view, not a copy).
func (b *Batch) ObsRow(i int) []float32 { return b.Obs[i*b.ObsDim : (i+1)*b.ObsDim] }

// FinalObsRow returns row i of FinalObs (a view); meaningful only if Done(i).
func (b *Batch) FinalObsRow(i int) []float32 { return b.FinalObs[i*b.ObsDim : (i+1)*b.ObsDim] }

// NextObsRow returns the observation that followed env i's last action:
// FinalObsRow(i) if its episode ended, else ObsRow(i). Use it to build
// (s, a, r, s′) transitions.
func (b *Batch) NextObsRow(i int) []float32 {
	if b.Done(i) {
		return b.FinalObsRow(i)
	}
	return b.ObsRow(i)
}

// NewBatch is the zeroed Batch of n envs of observation dimension obsDim.
func NewBatch(n, obsDim int) Batch {
	return Batch{
		ObsDim:     obsDim,
		Obs:        make([]float32, n*obsDim),
		Rewards:    make([]float32, n),
		Terminated: make([]bool, n),
		Truncated:  make([]bool, n),
		Infos:      make([]Info, n),
		FinalObs:   make([]float32, n*obsDim),
	}
}

// Factory builds the env for vector slot i.
type Factory func(slot int) (Env, error)

// VectorSeed is the seed vector env i is reset with by Vector.Reset(seed).
func VectorSeed(seed int64, i int) int64 {
	if seed < 0 {
		return NoSeed
	}
	return int64(rng.Derive(uint64(seed), "env/vector", i) >> 1)
}

// buildEnvs calls factory for each slot and checks the spaces agree.
func buildEnvs(n int, factory Factory) ([]Env, error) {
	if n <= 0 {
		return nil, fmt.Errorf("%w: vector of %d envs, want > 0", ErrInvalidOption, n)
	}
	if factory == nil {
		return nil, fmt.Errorf("%w: nil env factory", ErrInvalidOption)
	}
	envs := []Env{}
	fail := func(err error) ([]Env, error) {
		for _, e := range envs {
			e.Close()
		}
		return nil, err
	}
	for i := 0; i < n; i++ {
		e, err := factory(i)
		if err != nil {
			return fail(fmt.Errorf("env: vector slot %d: %w", i, err))
		}
		envs = append(envs, e)
		if i > 0 {
			if e.ObservationSpace().Dim() != envs[0].ObservationSpace().Dim() || e.ActionSpace().Dim() != envs[0].ActionSpace().Dim() {
				return fail(fmt.Errorf("%w: vector slot %d has spaces %v, %v; slot 0 has %v, %v", ErrInvalidOption,
					i, e.ObservationSpace(), e.ActionSpace(), envs[0].ObservationSpace(), envs[0].ActionSpace()))
			}
		}
	}
	return envs, nil
}

// stepOne steps env i with action a and fills row i of b, resetting the env
// when its episode ends (see Vector).
func stepOne(e Env, i int, a []float32, b *Batch) error {
	obs, r, term, trunc, info, err := e.Step(a)
	if err != nil {
		return fmt.Errorf("env: vector slot %d: %w", i, err)
	}
	d := b.ObsDim
	b.Rewards[i] = float32(r)
	b.Terminated[i] = term
	b.Truncated[i] = trunc
	b.Infos[i] = info
	if term || trunc {
		copy(b.FinalObs[i*d:(i+1)*d], obs)
		obs, _, err = e.Reset(NoSeed)
		if err != nil {
			return fmt.Errorf("env: vector slot %d: autoreset: %w", i, err)
		}
	}
	copy(b.Obs[i*d:(i+1)*d], obs)
	return nil
}

// resetOne resets env i with its derived seed and fills row i of b.
func resetOne(e Env, i int, seed int64, b *Batch) error {
	obs, info, err := e.Reset(VectorSeed(seed, i))
	if err != nil {
		return fmt.Errorf("env: vector slot %d: reset: %w", i, err)
	}
	d := b.ObsDim
	copy(b.Obs[i*d:(i+1)*d], obs)
	b.Rewards[i] = 0
	b.Terminated[i] = false
	b.Truncated[i] = false
	b.Infos[i] = info
	return nil
}

// CheckActions checks the n actions of a Vector step (n × space.Dim()
// values) up front, so that a bad one steps no env; errors wrap
// ErrInvalidAction and name the slot.
func CheckActions(space Space, n int, actions []float32) error {
	d := space.Dim()
	if len(actions) != n*d {
		return fmt.Errorf("%w: vector of %d envs wants %d×%d = %d action values, got %d", ErrInvalidAction, n, n, d, n*d, len(actions))
	}
	if disc, ok := space.(Discrete); ok {
		// CheckAction's check, with the space's type found once for the
		// n slots rather than once a slot: this runs every vector step.
		for i := range n {
			if _, err := disc.Index(actions[i : i+1]); err != nil {
				return fmt.Errorf("vector slot %d: %w", i, err)
			}
		}
		return nil
	}
	for i := 0; i < n; i++ {
		if err := CheckAction(space, actions[i*d:(i+1)*d]); err != nil {
			return fmt.Errorf("vector slot %d: %w", i, err)
		}
	}
	return nil
}

// VectorMode picks SyncVector or AsyncVector in MakeVector.
type VectorMode int

const (
	// Sync steps all envs in the caller's goroutine.
	Sync VectorMode = iota
	// Async steps them in parallel on a worker pool (GOMAXPROCS workers).
	Async
)

func (m VectorMode) String() string {
	switch m {
	case Sync:
		return "sync"
	case Async:
		return "async"
	}
	return fmt.Sprintf("VectorMode(%d)", int(m))
}

// MakeVector builds n envs with Make(id, opts...) in a SyncVector or an
// AsyncVector. For a multi-agent id (ParallelIDs) it returns a FlatVector
// of n agent rows (n / agents envs, stepped in the caller's goroutine). An
// id with a wrapper list (see Make) gives n wrapped envs in a SyncVector or
// an AsyncVector, even over a remote id: each env then holds a session of
// its own, since the wrappers step one env at a time. MakeVector is the
// zero Maker's: remote ids need a Maker with a remote Opener.
func MakeVector(id string, n int, mode VectorMode, opts ...Option) (Vector, error) {
	return Maker{}.MakeVector(id, n, mode, opts...)
}

// MakeVector is env.MakeVector with m's remote ids; for one of them the
// Opener builds the vector (mode is then irrelevant: the server steps the
// envs).
func (m Maker) MakeVector(id string, n int, mode VectorMode, opts ...Option) (Vector, error) {
	if m.IsParallel(id) {
		return m.makeFlatVector(id, n, opts, ReadOptions(opts...))
	}
	if m.opens(id) {
		return m.Remote.MakeVector(id, n, ReadOptions(opts...))
	}
	if _, _, wrapped, err := atari.SplitID(id); err != nil {
		return nil, err
	} else if !wrapped {
		if _, err := m.specOf(id); err != nil {
			return nil, err
		}
	}
	factory := func(int) (Env, error) { return m.Make(id, opts...) }
	switch mode {
	case Sync:
		return NewSyncVector(n, factory)
	case Async:
		return NewAsyncVector(n, factory, AsyncOptions{})
	}
	return nil, fmt.Errorf("%w: vector mode %v", ErrInvalidOption, mode)
}
