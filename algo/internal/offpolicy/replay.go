package offpolicy

import (
	"encoding"
	"fmt"
	"math"
	"math/rand/v2"

	"herd/algo"
	"herd/internal/scratch"
	"herd/replay"
	"herd/sample"
)

// ReplayConfig configures a Replay.
type ReplayConfig struct {
	// Capacity is the number of transitions kept (FIFO eviction).
	Capacity int
	// ObsDim and ActDim are the float32 widths of one observation and one
	// action (1 for a discrete action index).
	ObsDim, ActDim int
	// ObsEncoding is how the buffer stores observations:
	// algo.ReplayObsEncoding of the observation space (bits for binary
	// planes, bytes for 8-bit pixels); the zero value is float32. Sample
	// returns the same float32 values whichever it is.
	ObsEncoding sample.ObsEncoding
	// NSteps is n of the n-step return the env workers assemble (1 =
	// one-step TD): with n = 1 every discount is Gamma and none is stored.
	NSteps int
	// Gamma is the discount γ.
	Gamma float64
	// Locking is the buffer's synchronisation (runtime.replay_locking):
	// replay.TwoLock, the default — the PAL paper's two locks (stripe
	// locks for data and leaves, a shared tree lock for the inner levels)
	// but not its lazy writing: a slot's data and leaf are written in one
	// stripe critical section (replay/doc.go) — or replay.GlobalLock, one
	// mutex around every operation. Results on one goroutine are the same
	// bits either way.
	Locking replay.Locking
	// Prioritized selects replay.Prioritized (Schaul et al. 2016) instead of
	// replay.Uniform; Alpha and Beta are its exponents α and initial β, Eps
	// the constant added to |δ| to form a priority. β anneals linearly from
	// Beta to 1 over BetaSteps global steps (0: it stays at Beta).
	Prioritized bool
	Alpha, Beta float64
	Eps         float64
	BetaSteps   int64
}

// Replay is the replay memory of the off-policy algorithms (algo.Replay):
// a replay.Uniform or replay.Prioritized buffer holding the n-step
// transitions env workers assembled, flat minibatches with per-row
// discount, and priority updates from TD errors.
//
// The replay package stores (s, a, r, s', terminated, truncated) rows with
// no per-row discount, but an n-step transition cut short by a time limit
// bootstraps with γ^m, m < n. When n > 1 Replay therefore stores one extra
// float per observation row and keeps γ^m in the last column of the next
// observation (a float32 column whatever the observations' encoding:
// replay.Config.ObsFloatTail); Sample strips it again. With n = 1 the
// discount is always γ (Add refuses any other) and rows are stored as
// they are.
//
// The bootstrapped target of a sampled row is
//
//	y = Reward + Discount · (1 − Done) · V(NextObs).
//
// A Replay belongs to one goroutine. No allocation after the first Sample.
type Replay struct {
	cfg    ReplayConfig
	rowDim int // stored observation width: ObsDim, or ObsDim+1 for n > 1
	buf    replay.Buffer
	pri    *replay.Prioritized // nil for uniform replay

	add                    replay.Batch // one row, reused
	addPrio                [1]float64   // its initial priority, when given
	s                      replay.Sample
	prio                   []float64
	obs, next, disc, dones []float32
}

var _ algo.Replay = (*Replay)(nil)

// NewReplay builds the buffer.
func NewReplay(cfg ReplayConfig) (*Replay, error) {
	if cfg.NSteps < 1 || cfg.ObsDim < 1 || cfg.ActDim < 1 {
		return nil, fmt.Errorf("offpolicy: replay needs n_steps, obs and action widths ≥ 1, got %d, %d, %d",
			cfg.NSteps, cfg.ObsDim, cfg.ActDim)
	}
	rc := algo.ReplayStorage(cfg.ObsDim, cfg.ActDim, cfg.NSteps, cfg.ObsEncoding)
	rc.Capacity, rc.Alpha, rc.Beta, rc.Locking = cfg.Capacity, cfg.Alpha, cfg.Beta, cfg.Locking
	r := &Replay{cfg: cfg, rowDim: rc.ObsSize}
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
	r.add.Resize(1, r.rowDim, cfg.ActDim)
	return r, nil
}

// Fork returns a Replay over the same buffer with workspaces of its own,
// for another goroutine (algo.ForkReplay): the buffer is safe for
// concurrent use under either locking, so Add, Sample and UpdatePriorities
// may then run concurrently on r and its forks.
func (r *Replay) Fork() algo.Replay {
	f := &Replay{cfg: r.cfg, rowDim: r.rowDim, buf: r.buf, pri: r.pri}
	f.add.Resize(1, r.rowDim, r.cfg.ActDim)
	return f
}

// Locking is the buffer's synchronisation.
func (r *Replay) Locking() replay.Locking {
	if r.pri != nil {
		return r.pri.Config().Locking
	}
	if u, ok := r.buf.(*replay.Uniform); ok {
		return u.Config().Locking
	}
	return r.cfg.Locking
}

// Len is the number of stored transitions.
func (r *Replay) Len() int { return r.buf.Len() }

// Add stores tr's rows one by one, in order. Rows enter a prioritized
// replay at the running maximum priority, or at tr.Priorities when given
// (Ape-X initial priorities; each a finite number ≥ 0, used as it is: the
// prioritizer has added ε). A uniform replay refuses given priorities: a
// run that computes them without prioritized replay is misconfigured.
func (r *Replay) Add(tr *sample.Transitions) error {
	d := r.cfg.ObsDim
	if tr.ObsDim != d || tr.ActDim != r.cfg.ActDim {
		return fmt.Errorf("offpolicy: transitions of obs %d, action %d for a replay of %d, %d", tr.ObsDim, tr.ActDim, d, r.cfg.ActDim)
	}
	a, n := r.cfg.ActDim, tr.N
	// The checks of tr.Check, without its allocations (Add is per step).
	if n < 0 || len(tr.Obs) != n*d || len(tr.NextObs) != n*d || len(tr.Actions) != n*a ||
		len(tr.Rewards) != n || len(tr.Discounts) != n || len(tr.Dones) != n {
		return fmt.Errorf("%w: %d transitions with %d, %d, %d, %d, %d, %d values", sample.ErrShape,
			n, len(tr.Obs), len(tr.Actions), len(tr.Rewards), len(tr.NextObs), len(tr.Discounts), len(tr.Dones))
	}
	given := len(tr.Priorities) > 0
	if given {
		if r.pri == nil {
			return fmt.Errorf("offpolicy: %d initial priorities given to a uniform replay (initial priorities need prioritized replay)", len(tr.Priorities))
		}
		if len(tr.Priorities) != n {
			return fmt.Errorf("%w: %d initial priorities for %d transitions", sample.ErrShape, len(tr.Priorities), n)
		}
		// Checked before any row is stored, so a bad batch stores nothing.
		for i, p := range tr.Priorities {
			if !(p >= 0) || math.IsInf(float64(p), 1) {
				return fmt.Errorf("offpolicy: initial priority of transition %d is %v, want a finite number ≥ 0: %w", i, p, replay.ErrPriority)
			}
		}
	}
	for i := range tr.N {
		copy(r.add.Obs[:d], tr.Obs[i*d:(i+1)*d])
		copy(r.add.NextObs[:d], tr.NextObs[i*d:(i+1)*d])
		if r.rowDim > d {
			r.add.Obs[d] = 0
			r.add.NextObs[d] = tr.Discounts[i]
		} else if tr.Discounts[i] != float32(r.cfg.Gamma) {
			return fmt.Errorf("offpolicy: a one-step replay got discount %v, want γ = %v", tr.Discounts[i], float32(r.cfg.Gamma))
		}
		copy(r.add.Action, tr.Actions[i*a:(i+1)*a])
		r.add.Reward[0] = tr.Rewards[i]
		r.add.Terminated[0] = tr.Dones[i] != 0
		var err error
		if given {
			r.addPrio[0] = float64(tr.Priorities[i])
			err = r.pri.AddWithPriorities(&r.add, r.addPrio[:])
		} else {
			err = r.buf.Add(&r.add)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Sample draws n transitions with rng into dst, whose slices then alias
// the Replay's workspace. For prioritized replay β is first set for
// global step `step`.
func (r *Replay) Sample(dst *algo.Minibatch, n int, step int64, rng *rand.Rand) error {
	if r.pri != nil && r.cfg.BetaSteps > 0 {
		// β anneals linearly to 1 over the run (Schaul et al. 2016, §3.4).
		if err := r.pri.SetBeta(LinearSchedule(r.cfg.Beta, 1, int(r.cfg.BetaSteps), int(step))); err != nil {
			return err
		}
	}
	if err := r.buf.Sample(&r.s, n, rng); err != nil {
		return err
	}
	d := r.cfg.ObsDim
	r.disc = scratch.Resize(r.disc, n)
	r.dones = scratch.Resize(r.dones, n)
	if r.rowDim == d {
		r.obs, r.next = r.s.Obs, r.s.NextObs
		for i := range n {
			r.disc[i] = float32(r.cfg.Gamma)
		}
	} else {
		// Strip the discount column (see the type's doc).
		r.obs, r.next = scratch.Resize(r.obs, n*d), scratch.Resize(r.next, n*d)
		w := r.rowDim
		for i := range n {
			copy(r.obs[i*d:(i+1)*d], r.s.Obs[i*w:i*w+d])
			copy(r.next[i*d:(i+1)*d], r.s.NextObs[i*w:i*w+d])
			r.disc[i] = r.s.NextObs[i*w+d]
		}
	}
	for i := range n {
		r.dones[i] = 0
		if r.s.Terminated[i] {
			r.dones[i] = 1
		}
	}
	*dst = algo.Minibatch{
		Transitions: sample.Transitions{N: n, ObsDim: d, ActDim: r.cfg.ActDim,
			Obs: r.obs, Actions: r.s.Action, Rewards: r.s.Reward, NextObs: r.next, Discounts: r.disc, Dones: r.dones},
		Weights: r.s.Weight, Index: r.s.Index, Gen: r.s.Gen,
	}
	return nil
}

// UpdatePriorities sets the priority of each row of mb to |tdErr[i]| + Eps
// (prioritized replay only; a no-op otherwise). Slots overwritten since the
// Sample are skipped by the buffer (generations).
func (r *Replay) UpdatePriorities(mb *algo.Minibatch, tdErr []float32) error {
	if r.pri == nil {
		return nil
	}
	if len(tdErr) != len(mb.Index) || len(mb.Gen) != len(mb.Index) {
		return fmt.Errorf("offpolicy: %d TD errors for a sample of %d", len(tdErr), len(mb.Index))
	}
	r.prio = scratch.Resize(r.prio, len(tdErr))
	for i, e := range tdErr {
		r.prio[i] = math.Abs(float64(e)) + r.cfg.Eps
	}
	_, err := r.pri.UpdatePriorities(mb.Index, mb.Gen, r.prio)
	return err
}

// MarshalBinary returns the buffer's whole state (replay.Uniform's or
// replay.Prioritized's MarshalBinary): a checkpoint's replay section.
func (r *Replay) MarshalBinary() ([]byte, error) {
	m, ok := r.buf.(encoding.BinaryMarshaler)
	if !ok {
		return nil, fmt.Errorf("offpolicy: replay %T cannot save its state", r.buf)
	}
	return m.MarshalBinary()
}

// UnmarshalBinary restores a state MarshalBinary returned into a Replay
// built with the same ReplayConfig.
func (r *Replay) UnmarshalBinary(b []byte) error {
	u, ok := r.buf.(encoding.BinaryUnmarshaler)
	if !ok {
		return fmt.Errorf("offpolicy: replay %T cannot restore its state", r.buf)
	}
	return u.UnmarshalBinary(b)
}
