package offpolicy

import (
	"fmt"
	"math"
	"math/rand/v2"

	"herd/replay"
)

// ReplayConfig configures a Replay.
type ReplayConfig struct {
	// Capacity is the number of transitions kept (FIFO eviction).
	Capacity int
	// ObsDim and ActDim are the float32 widths of one observation and one
	// action (1 for a discrete action index).
	ObsDim, ActDim int
	// NumEnvs is the number of environments feeding the buffer; each gets
	// its own n-step accumulator.
	NumEnvs int
	// NSteps is n of the n-step return (1 = one-step TD).
	NSteps int
	// Gamma is the discount γ.
	Gamma float64
	// Prioritized selects replay.Prioritized (Schaul et al. 2016) instead of
	// replay.Uniform; Alpha and Beta are its exponents α and initial β, Eps
	// the constant added to |δ| to form a priority.
	Prioritized bool
	Alpha, Beta float64
	Eps         float64
}

// Replay joins what every off-policy learner does around a replay buffer:
// n-step accumulation per environment, storage, sampling into flat
// minibatches, and (for prioritized replay) priority updates.
//
// The replay package stores (s, a, r, s', terminated, truncated) rows with
// no per-row discount, but an n-step transition cut short by a time limit
// bootstraps with γ^m, m < n. When n > 1 Replay therefore stores one extra
// float per observation row and keeps γ^m in the last column of the next
// observation; Sample strips it again. With n = 1 the discount is always γ
// and rows are stored as they are.
//
// After Sample the exported slices hold the minibatch: Obs and NextObs
// (B×ObsDim), Action (B×ActDim), Reward, Discount (γ^m), NotDone (1 − done),
// Weight (importance weights, 1 for uniform replay). They are reused by the
// next Sample. The bootstrapped target is
//
//	y = Reward + Discount · NotDone · V(NextObs).
//
// A Replay belongs to the learner's goroutine. No allocation after the first
// Sample.
type Replay struct {
	cfg    ReplayConfig
	rowDim int // stored observation width: ObsDim, or ObsDim+1 for n > 1
	buf    replay.Buffer
	pri    *replay.Prioritized // nil for uniform replay

	nstep []*NStep
	tr    Transition
	add   replay.Batch // one row, reused
	s     replay.Sample
	prio  []float64

	Obs, Action, Reward, NextObs, Discount, NotDone, Weight []float32
}

// NewReplay builds the buffer and the n-step accumulators.
func NewReplay(cfg ReplayConfig) (*Replay, error) {
	if cfg.NSteps < 1 || cfg.NumEnvs < 1 || cfg.ObsDim < 1 || cfg.ActDim < 1 {
		return nil, fmt.Errorf("offpolicy: replay needs n_steps, num_envs, obs and action widths ≥ 1, got %d, %d, %d, %d",
			cfg.NSteps, cfg.NumEnvs, cfg.ObsDim, cfg.ActDim)
	}
	r := &Replay{cfg: cfg, rowDim: cfg.ObsDim}
	if cfg.NSteps > 1 {
		r.rowDim++
	}
	rc := replay.Config{Capacity: cfg.Capacity, ObsSize: r.rowDim, ActSize: cfg.ActDim,
		Alpha: cfg.Alpha, Beta: cfg.Beta, Locking: replay.GlobalLock}
	var err error
	if cfg.Prioritized {
		r.pri, err = replay.NewPrioritized(rc)
		r.buf = r.pri
	} else {
		r.buf, err = replay.NewUniform(rc)
	}
	if err != nil {
		return nil, err
	}
	for range cfg.NumEnvs {
		r.nstep = append(r.nstep, NewNStep(cfg.NSteps, float32(cfg.Gamma), cfg.ObsDim, cfg.ActDim))
	}
	r.add.Resize(1, r.rowDim, cfg.ActDim)
	return r, nil
}

// Len is the number of stored transitions.
func (r *Replay) Len() int { return r.buf.Len() }

// Store records env i's step (obs, action) → (reward, nextObs, terminated,
// truncated); nextObs must be the true next observation (the final one when
// the episode ended). Completed n-step transitions go into the buffer.
func (r *Replay) Store(i int, obs, action []float32, reward float32, nextObs []float32, terminated, truncated bool) error {
	ns := r.nstep[i]
	ns.Push(obs, action, reward, nextObs, terminated, truncated)
	d := r.cfg.ObsDim
	for ns.Pop(&r.tr) {
		copy(r.add.Obs[:d], r.tr.Obs)
		copy(r.add.NextObs[:d], r.tr.NextObs)
		if r.rowDim > d {
			r.add.Obs[d] = 0
			r.add.NextObs[d] = r.tr.Discount
		}
		copy(r.add.Action, r.tr.Action)
		r.add.Reward[0] = r.tr.Reward
		r.add.Terminated[0] = r.tr.Done
		r.add.Truncated[0] = truncated && !r.tr.Done
		if err := r.buf.Add(&r.add); err != nil {
			return err
		}
	}
	return nil
}

// SetBeta sets the importance-sampling exponent β of prioritized replay (a
// no-op for uniform replay).
func (r *Replay) SetBeta(beta float64) error {
	if r.pri == nil {
		return nil
	}
	return r.pri.SetBeta(beta)
}

// Sample draws n transitions with rng into the exported slices.
func (r *Replay) Sample(n int, rng *rand.Rand) error {
	if err := r.buf.Sample(&r.s, n, rng); err != nil {
		return err
	}
	d := r.cfg.ObsDim
	r.Reward, r.Action, r.Weight = r.s.Reward, r.s.Action, r.s.Weight
	r.Discount = grow(r.Discount, n)
	r.NotDone = grow(r.NotDone, n)
	if r.rowDim == d {
		r.Obs, r.NextObs = r.s.Obs, r.s.NextObs
		for i := range n {
			r.Discount[i] = float32(r.cfg.Gamma)
		}
	} else {
		// Strip the discount column (see the type's doc).
		r.Obs, r.NextObs = grow(r.Obs, n*d), grow(r.NextObs, n*d)
		w := r.rowDim
		for i := range n {
			copy(r.Obs[i*d:(i+1)*d], r.s.Obs[i*w:i*w+d])
			copy(r.NextObs[i*d:(i+1)*d], r.s.NextObs[i*w:i*w+d])
			r.Discount[i] = r.s.NextObs[i*w+d]
		}
	}
	for i := range n {
		r.NotDone[i] = 1
		if r.s.Terminated[i] {
			r.NotDone[i] = 0
		}
	}
	return nil
}

// UpdatePriorities sets the priority of each transition of the last Sample
// to |tdErr[i]| + Eps (prioritized replay only; a no-op otherwise). Slots
// overwritten since the Sample are skipped by the buffer (generations).
func (r *Replay) UpdatePriorities(tdErr []float32) error {
	if r.pri == nil {
		return nil
	}
	if len(tdErr) != r.s.Len() {
		return fmt.Errorf("offpolicy: %d TD errors for a sample of %d", len(tdErr), r.s.Len())
	}
	r.prio = grow(r.prio, len(tdErr))
	for i, e := range tdErr {
		r.prio[i] = math.Abs(float64(e)) + r.cfg.Eps
	}
	_, err := r.pri.UpdatePriorities(r.s.Index, r.s.Gen, r.prio)
	return err
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}
