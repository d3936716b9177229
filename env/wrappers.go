package env

import (
	"fmt"
	"math"
)

// TimeLimit truncates episodes after MaxSteps steps (Gymnasium's TimeLimit):
// the step that reaches the limit returns truncated = true, and leaves
// terminated as the inner env reported it (both may be true). A later Step
// without Reset returns ErrNeedsReset.
//
// Cost: one counter per step, no allocation.
type TimeLimit struct {
	inner    Env
	maxSteps int
	elapsed  int
	over     bool // the last step truncated; Reset clears it
}

// NewTimeLimit wraps e so that episodes end after maxSteps (> 0) steps.
func NewTimeLimit(e Env, maxSteps int) (*TimeLimit, error) {
	if maxSteps <= 0 {
		return nil, fmt.Errorf("%w: TimeLimit max steps %d, want > 0", ErrInvalidOption, maxSteps)
	}
	return &TimeLimit{inner: e, maxSteps: maxSteps}, nil
}

func (t *TimeLimit) ObservationSpace() Space { return t.inner.ObservationSpace() }
func (t *TimeLimit) ActionSpace() Space      { return t.inner.ActionSpace() }
func (t *TimeLimit) Close() error            { return t.inner.Close() }
func (t *TimeLimit) Unwrap() Env             { return t.inner }

// MaxSteps is the episode length limit.
func (t *TimeLimit) MaxSteps() int { return t.maxSteps }

// Elapsed is the number of steps taken in the current episode.
func (t *TimeLimit) Elapsed() int { return t.elapsed }

func (t *TimeLimit) Reset(seed int64) ([]float32, Info, error) {
	t.elapsed, t.over = 0, false
	return t.inner.Reset(seed)
}

func (t *TimeLimit) Step(action []float32) ([]float32, float64, bool, bool, Info, error) {
	if t.over {
		return nil, 0, false, false, Info{}, fmt.Errorf("%w: episode was truncated at %d steps", ErrNeedsReset, t.maxSteps)
	}
	obs, r, term, trunc, info, err := t.inner.Step(action)
	if err != nil {
		return obs, r, term, trunc, info, err
	}
	t.elapsed++
	if t.elapsed >= t.maxSteps {
		trunc = true
		t.over = true
	}
	return obs, r, term, trunc, info, nil
}

// RecordEpisodeStatistics sums rewards and counts steps, and on the step that
// ends an episode (terminated or truncated) sets Info.HasEpisode and
// Info.Episode (Gymnasium's info["episode"]). Put it outside TimeLimit so it
// sees truncation, and inside reward normalisation so it reports raw
// returns; env.Make with WithEpisodeStatistics does both.
type RecordEpisodeStatistics struct {
	inner  Env
	ret    float64
	length int
}

// NewRecordEpisodeStatistics wraps e.
func NewRecordEpisodeStatistics(e Env) *RecordEpisodeStatistics {
	return &RecordEpisodeStatistics{inner: e}
}

func (s *RecordEpisodeStatistics) ObservationSpace() Space { return s.inner.ObservationSpace() }
func (s *RecordEpisodeStatistics) ActionSpace() Space      { return s.inner.ActionSpace() }
func (s *RecordEpisodeStatistics) Close() error            { return s.inner.Close() }
func (s *RecordEpisodeStatistics) Unwrap() Env             { return s.inner }

func (s *RecordEpisodeStatistics) Reset(seed int64) ([]float32, Info, error) {
	s.ret, s.length = 0, 0
	return s.inner.Reset(seed)
}

func (s *RecordEpisodeStatistics) Step(action []float32) ([]float32, float64, bool, bool, Info, error) {
	obs, r, term, trunc, info, err := s.inner.Step(action)
	if err != nil {
		return obs, r, term, trunc, info, err
	}
	s.ret += r
	s.length++
	if term || trunc {
		info.HasEpisode = true
		info.Episode = EpisodeStats{Return: s.ret, Length: s.length}
		s.ret, s.length = 0, 0
	}
	return obs, r, term, trunc, info, nil
}

// ClipAction clips each coordinate of a Box action to the inner action
// space's bounds before passing it on (Gymnasium's ClipAction). Its own
// action space is the unbounded Box of the same shape. It copies into an
// internal buffer, so the caller's slice is untouched; no allocation.
type ClipAction struct {
	inner Env
	box   Box
	space Box
	buf   []float32
}

// NewClipAction wraps e, whose action space must be a Box.
func NewClipAction(e Env) (*ClipAction, error) {
	b, ok := e.ActionSpace().(Box)
	if !ok {
		return nil, fmt.Errorf("%w: ClipAction needs a Box action space, got %v", ErrInvalidOption, e.ActionSpace())
	}
	inf := float32(math.Inf(1))
	sp := UniformBox(-inf, inf, b.Dim())
	sp.Dims = b.Dims
	return &ClipAction{inner: e, box: b, space: sp, buf: make([]float32, b.Dim())}, nil
}

func (c *ClipAction) ObservationSpace() Space                   { return c.inner.ObservationSpace() }
func (c *ClipAction) ActionSpace() Space                        { return c.space }
func (c *ClipAction) Close() error                              { return c.inner.Close() }
func (c *ClipAction) Unwrap() Env                               { return c.inner }
func (c *ClipAction) Reset(seed int64) ([]float32, Info, error) { return c.inner.Reset(seed) }

func (c *ClipAction) Step(action []float32) ([]float32, float64, bool, bool, Info, error) {
	if err := c.box.Check(action); err != nil {
		return nil, 0, false, false, Info{}, err
	}
	for i, v := range action {
		c.buf[i] = min(max(v, c.box.Low[i]), c.box.High[i])
	}
	return c.inner.Step(c.buf)
}

// StrictActions rejects Box actions outside the bounds with
// ErrInvalidAction, instead of letting the env clip them as Gymnasium's
// envs do. Useful to catch a policy whose output layer ignores the bounds.
type StrictActions struct {
	inner Env
	box   Box
	isBox bool
}

// NewStrictActions wraps e. For non-Box action spaces it only forwards
// (Discrete and MultiDiscrete actions are always checked by the env).
func NewStrictActions(e Env) *StrictActions {
	b, ok := e.ActionSpace().(Box)
	return &StrictActions{inner: e, box: b, isBox: ok}
}

func (s *StrictActions) ObservationSpace() Space                   { return s.inner.ObservationSpace() }
func (s *StrictActions) ActionSpace() Space                        { return s.inner.ActionSpace() }
func (s *StrictActions) Close() error                              { return s.inner.Close() }
func (s *StrictActions) Unwrap() Env                               { return s.inner }
func (s *StrictActions) Reset(seed int64) ([]float32, Info, error) { return s.inner.Reset(seed) }

func (s *StrictActions) Step(action []float32) ([]float32, float64, bool, bool, Info, error) {
	if s.isBox {
		if err := s.box.CheckBounds(action); err != nil {
			return nil, 0, false, false, Info{}, err
		}
	}
	return s.inner.Step(action)
}
