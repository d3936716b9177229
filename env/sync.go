package env

import (
	"errors"
	"fmt"
)

// SyncVector steps N envs one after another in the caller's goroutine
// (Gymnasium's SyncVectorEnv). It has no goroutines and no locks; use it
// when stepping is cheap next to the policy (classic control) or when an
// outer layer already runs one vector per core. See Vector for the
// autoreset convention and seeding. Not safe for concurrent use.
type SyncVector struct {
	envs   []Env
	obs    Space
	act    Space
	batch  Batch
	closed bool
}

// NewSyncVector builds n envs with factory(0), …, factory(n−1).
func NewSyncVector(n int, factory Factory) (*SyncVector, error) {
	envs, err := buildEnvs(n, factory)
	if err != nil {
		return nil, err
	}
	o, a := envs[0].ObservationSpace(), envs[0].ActionSpace()
	return &SyncVector{envs: envs, obs: o, act: a, batch: NewBatch(n, o.Dim())}, nil
}

func (v *SyncVector) NumEnvs() int            { return len(v.envs) }
func (v *SyncVector) ObservationSpace() Space { return v.obs }
func (v *SyncVector) ActionSpace() Space      { return v.act }

// Env returns env i, e.g. to read a wrapper's statistics.
func (v *SyncVector) Env(i int) Env { return v.envs[i] }

func (v *SyncVector) Reset(seed int64) (*Batch, error) {
	if v.closed {
		return nil, fmt.Errorf("%w: SyncVector.Reset", ErrClosed)
	}
	for i, e := range v.envs {
		if err := resetOne(e, i, seed, &v.batch); err != nil {
			return nil, err
		}
	}
	return &v.batch, nil
}

func (v *SyncVector) Step(actions []float32) (*Batch, error) {
	if v.closed {
		return nil, fmt.Errorf("%w: SyncVector.Step", ErrClosed)
	}
	if err := CheckActions(v.act, len(v.envs), actions); err != nil {
		return nil, err
	}
	d := v.act.Dim()
	for i, e := range v.envs {
		if err := stepOne(e, i, actions[i*d:(i+1)*d], &v.batch); err != nil {
			return nil, err
		}
	}
	return &v.batch, nil
}

func (v *SyncVector) Close() error {
	if v.closed {
		return nil
	}
	v.closed = true
	var errs []error
	for _, e := range v.envs {
		errs = append(errs, e.Close())
	}
	return errors.Join(errs...)
}

// NewSyncVectorOf is a SyncVector over envs the caller built and reset
// one by one (each with a seed of its own); the vector owns them from
// here and closes them. They must share their spaces.
func NewSyncVectorOf(envs []Env) (*SyncVector, error) {
	if len(envs) == 0 {
		return nil, fmt.Errorf("%w: a vector of no envs", ErrInvalidOption)
	}
	o, a := envs[0].ObservationSpace(), envs[0].ActionSpace()
	for i, e := range envs[1:] {
		if e.ObservationSpace().Dim() != o.Dim() || e.ActionSpace().Dim() != a.Dim() {
			return nil, fmt.Errorf("%w: env %d has spaces %v, %v; env 0 %v, %v", ErrInvalidOption, i+1, e.ObservationSpace(), e.ActionSpace(), o, a)
		}
	}
	return &SyncVector{envs: envs, obs: o, act: a, batch: NewBatch(len(envs), o.Dim())}, nil
}
