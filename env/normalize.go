package env

import (
	"fmt"
	"math"
)

// RunningMeanStd tracks the mean and variance of a stream of vectors with
// Chan et al.'s parallel update (Gymnasium's RunningMeanStd): for a batch
// with mean μ_b, variance σ²_b and count n_b,
//
//	δ = μ_b − μ,  N = n + n_b,  μ ← μ + δ·n_b/N,
//	σ² ← (σ²·n + σ²_b·n_b + δ²·n·n_b/N) / N,  n ← N.
//
// It starts at μ = 0, σ² = 1, n = 1e-4 as Gymnasium's does. The exported
// fields are the whole state: save them (e.g. as JSON) and restore with
// SetStats on the wrapper.
type RunningMeanStd struct {
	Mean  []float64 `json:"mean"`
	Var   []float64 `json:"var"`
	Count float64   `json:"count"`
}

// NewRunningMeanStd returns the initial statistics for n-vectors.
func NewRunningMeanStd(n int) RunningMeanStd {
	s := RunningMeanStd{Mean: make([]float64, n), Var: make([]float64, n), Count: 1e-4}
	for i := range s.Var {
		s.Var[i] = 1
	}
	return s
}

// Update adds one sample x (a batch of one: σ²_b = 0, n_b = 1).
func (s *RunningMeanStd) Update(x []float32) {
	tot := s.Count + 1
	for i, v := range x {
		delta := float64(v) - s.Mean[i]
		s.Mean[i] += delta / tot
		m2 := s.Var[i]*s.Count + delta*delta*s.Count/tot
		s.Var[i] = m2 / tot
	}
	s.Count = tot
}

// Clone returns a deep copy.
func (s RunningMeanStd) Clone() RunningMeanStd {
	return RunningMeanStd{Mean: append([]float64(nil), s.Mean...), Var: append([]float64(nil), s.Var...), Count: s.Count}
}

func (s RunningMeanStd) validate(n int) error {
	if len(s.Mean) != n || len(s.Var) != n {
		return fmt.Errorf("%w: running stats have %d means and %d variances, want %d", ErrInvalidOption, len(s.Mean), len(s.Var), n)
	}
	if !(s.Count > 0) || math.IsInf(s.Count, 0) {
		return fmt.Errorf("%w: running stats count %v, want finite > 0", ErrInvalidOption, s.Count)
	}
	for i := range s.Mean {
		if math.IsNaN(s.Mean[i]) || math.IsInf(s.Mean[i], 0) || !(s.Var[i] >= 0) || math.IsInf(s.Var[i], 0) {
			return fmt.Errorf("%w: running stats [%d] mean %v var %v", ErrInvalidOption, i, s.Mean[i], s.Var[i])
		}
	}
	return nil
}

// NormalizeObservation returns (obs − μ)/√(σ² + ε) with running statistics
// updated by every observation it passes on, including those from Reset
// (Gymnasium's NormalizeObservation, ε = 1e-8 by default). Its observation
// space is the unbounded Box of the same shape. Freeze the statistics for
// evaluation with SetUpdate(false); save and restore them with Stats and
// SetStats.
type NormalizeObservation struct {
	inner  Env
	rms    RunningMeanStd
	eps    float64
	update bool
	space  Box
	buf    []float32
}

// NewNormalizeObservation wraps e (Box observations); epsilon ≤ 0 means
// 1e-8.
func NewNormalizeObservation(e Env, epsilon float64) (*NormalizeObservation, error) {
	b, ok := e.ObservationSpace().(Box)
	if !ok {
		return nil, fmt.Errorf("%w: NormalizeObservation needs a Box observation space, got %v", ErrInvalidOption, e.ObservationSpace())
	}
	if epsilon <= 0 {
		epsilon = 1e-8
	}
	inf := float32(math.Inf(1))
	sp := UniformBox(-inf, inf, b.Dim())
	sp.Dims = b.Dims
	return &NormalizeObservation{inner: e, rms: NewRunningMeanStd(b.Dim()), eps: epsilon, update: true, space: sp, buf: make([]float32, b.Dim())}, nil
}

func (n *NormalizeObservation) ObservationSpace() Space { return n.space }
func (n *NormalizeObservation) ActionSpace() Space      { return n.inner.ActionSpace() }
func (n *NormalizeObservation) Close() error            { return n.inner.Close() }
func (n *NormalizeObservation) Unwrap() Env             { return n.inner }

// SetUpdate turns updating of the running statistics on or off.
func (n *NormalizeObservation) SetUpdate(on bool) { n.update = on }

// Stats returns a copy of the running statistics.
func (n *NormalizeObservation) Stats() RunningMeanStd { return n.rms.Clone() }

// SetStats replaces the running statistics with a copy of s.
func (n *NormalizeObservation) SetStats(s RunningMeanStd) error {
	if err := s.validate(len(n.buf)); err != nil {
		return fmt.Errorf("NormalizeObservation.SetStats: %w", err)
	}
	n.rms = s.Clone()
	return nil
}

func (n *NormalizeObservation) normalize(obs []float32) []float32 {
	if n.update {
		n.rms.Update(obs)
	}
	for i, v := range obs {
		n.buf[i] = float32((float64(v) - n.rms.Mean[i]) / math.Sqrt(n.rms.Var[i]+n.eps))
	}
	return n.buf
}

func (n *NormalizeObservation) Reset(seed int64) ([]float32, Info, error) {
	obs, info, err := n.inner.Reset(seed)
	if err != nil {
		return obs, info, err
	}
	return n.normalize(obs), info, nil
}

func (n *NormalizeObservation) Step(action []float32) ([]float32, float64, bool, bool, Info, error) {
	obs, r, term, trunc, info, err := n.inner.Step(action)
	if err != nil {
		return obs, r, term, trunc, info, err
	}
	return n.normalize(obs), r, term, trunc, info, nil
}

// NormalizeReward scales rewards by the running standard deviation of the
// discounted return (Gymnasium's NormalizeReward): G ← γ·G·(1 − terminated)
// + r, statistics updated with G, reward returned as r/√(σ²_G + ε). As in
// Gymnasium, G is not cleared by Reset, only by termination. Defaults: γ =
// 0.99, ε = 1e-8.
type NormalizeReward struct {
	inner  Env
	rms    RunningMeanStd
	ret    float64
	gamma  float64
	eps    float64
	update bool
}

// NewNormalizeReward wraps e; gamma must be in [0, 1]; epsilon ≤ 0 means
// 1e-8.
func NewNormalizeReward(e Env, gamma, epsilon float64) (*NormalizeReward, error) {
	if !(gamma >= 0 && gamma <= 1) {
		return nil, fmt.Errorf("%w: NormalizeReward gamma %v, want [0, 1]", ErrInvalidOption, gamma)
	}
	if epsilon <= 0 {
		epsilon = 1e-8
	}
	return &NormalizeReward{inner: e, rms: NewRunningMeanStd(1), gamma: gamma, eps: epsilon, update: true}, nil
}

func (n *NormalizeReward) ObservationSpace() Space                   { return n.inner.ObservationSpace() }
func (n *NormalizeReward) ActionSpace() Space                        { return n.inner.ActionSpace() }
func (n *NormalizeReward) Close() error                              { return n.inner.Close() }
func (n *NormalizeReward) Unwrap() Env                               { return n.inner }
func (n *NormalizeReward) Reset(seed int64) ([]float32, Info, error) { return n.inner.Reset(seed) }

// SetUpdate turns updating of the running statistics on or off.
func (n *NormalizeReward) SetUpdate(on bool) { n.update = on }

// Stats returns a copy of the return statistics.
func (n *NormalizeReward) Stats() RunningMeanStd { return n.rms.Clone() }

// SetStats replaces the return statistics with a copy of s.
func (n *NormalizeReward) SetStats(s RunningMeanStd) error {
	if err := s.validate(1); err != nil {
		return fmt.Errorf("NormalizeReward.SetStats: %w", err)
	}
	n.rms = s.Clone()
	return nil
}

// Return is the running discounted return G (part of the state to save).
func (n *NormalizeReward) Return() float64 { return n.ret }

// SetReturn restores G.
func (n *NormalizeReward) SetReturn(g float64) { n.ret = g }

func (n *NormalizeReward) Step(action []float32) ([]float32, float64, bool, bool, Info, error) {
	obs, r, term, trunc, info, err := n.inner.Step(action)
	if err != nil {
		return obs, r, term, trunc, info, err
	}
	notTerm := 1.0
	if term {
		notTerm = 0
	}
	n.ret = n.ret*n.gamma*notTerm + r
	if n.update {
		n.updateReturn(n.ret)
	}
	return obs, r / math.Sqrt(n.rms.Var[0]+n.eps), term, trunc, info, nil
}

// updateReturn is RunningMeanStd.Update for one float64 sample, kept in
// float64 so the return is not rounded to float32.
func (n *NormalizeReward) updateReturn(g float64) {
	s := &n.rms
	tot := s.Count + 1
	delta := g - s.Mean[0]
	s.Mean[0] += delta / tot
	s.Var[0] = (s.Var[0]*s.Count + delta*delta*s.Count/tot) / tot
	s.Count = tot
}
