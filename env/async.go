package env

import (
	"errors"
	"fmt"
	"runtime"

	"herd/internal/twin"
)

// AsyncOptions configures an AsyncVector.
type AsyncOptions struct {
	// Workers is the number of goroutines stepping envs; 0 means
	// min(GOMAXPROCS, N). Each worker owns a contiguous block of envs.
	Workers int
}

// AsyncVector steps N envs in parallel on a pool of worker goroutines
// (Gymnasium's AsyncVectorEnv, with goroutines instead of processes and
// shared memory instead of pipes). The envs are split into Workers
// contiguous blocks; the calling goroutine steps block 0 and one worker
// goroutine per other block steps the rest, each writing its rows of the
// shared Batch directly. Rows are disjoint, and the caller reads the Batch
// only after every worker has signalled, so no lock is needed. Each worker
// is a twin.Pair, which hands off by polling for a few tens of
// microseconds while the machine is quiet (a channel hand-off, which parks
// and wakes goroutines, cost more than a block of cheap env steps); when
// the cores are shared the caller steps a block itself whenever its worker
// is late, and stops handing blocks over for a while when that keeps
// happening (see package twin).
//
// Results are identical to SyncVector's for the same seed: each env's
// stream depends only on its slot. Close stops the workers and waits for
// them. Not safe for concurrent use (one goroutine drives it).
type AsyncVector struct {
	envs   []Env
	obs    Space
	act    Space
	batch  Batch
	blocks [][2]int
	pairs  []*twin.Pair // pairs[k] runs block k (k ≥ 1); nil with one processor
	jobs   []func()     // jobs[k] runs block k into errs[k]
	errs   []error      // errs[w] is worker w's result for the current call
	closed bool

	// The current job, written by the caller before signalling workers.
	job     int // jobStep or jobReset
	actions []float32
	seed    int64
}

const (
	jobStep = iota
	jobReset
)

// NewAsyncVector builds n envs with factory(0), …, factory(n−1) and starts the
// workers.
func NewAsyncVector(n int, factory Factory, opts AsyncOptions) (*AsyncVector, error) {
	if opts.Workers < 0 {
		return nil, fmt.Errorf("%w: AsyncVector workers %d, want ≥ 0", ErrInvalidOption, opts.Workers)
	}
	envs, err := buildEnvs(n, factory)
	if err != nil {
		return nil, err
	}
	w := opts.Workers
	if w == 0 {
		w = runtime.GOMAXPROCS(0)
	}
	w = min(w, n)
	o, a := envs[0].ObservationSpace(), envs[0].ActionSpace()
	v := &AsyncVector{
		envs: envs, obs: o, act: a, batch: NewBatch(n, o.Dim()),
		errs: make([]error, w),
	}
	for k := 0; k < w; k++ {
		v.blocks = append(v.blocks, [2]int{k * n / w, (k + 1) * n / w})
		v.jobs = append(v.jobs, func() { v.errs[k] = v.doBlock(k) })
	}
	// Block 0 runs in the caller's goroutine (see run), so w blocks need
	// only w−1 workers and one worker means none.
	v.pairs = make([]*twin.Pair, w)
	for k := 1; k < w; k++ {
		v.pairs[k] = twin.NewWorker()
	}
	return v, nil
}

// doBlock runs the current job on block k's envs.
func (v *AsyncVector) doBlock(k int) error {
	lo, hi := v.blocks[k][0], v.blocks[k][1]
	d := v.act.Dim()
	for i := lo; i < hi; i++ {
		var err error
		if v.job == jobReset {
			err = resetOne(v.envs[i], i, v.seed, &v.batch)
		} else {
			err = stepOne(v.envs[i], i, v.actions[i*d:(i+1)*d], &v.batch)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// run hands the current job to every worker goroutine, does block 0 in the
// calling goroutine meanwhile, and waits for all of them; it returns the
// error of the lowest-numbered failing block, so the error is the same
// whatever the scheduling.
func (v *AsyncVector) run() error {
	for k := 1; k < len(v.blocks); k++ {
		v.pairs[k].Go(v.jobs[k])
	}
	v.jobs[0]()
	for k := 1; k < len(v.blocks); k++ {
		v.pairs[k].Wait()
	}
	for _, err := range v.errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func (v *AsyncVector) NumEnvs() int            { return len(v.envs) }
func (v *AsyncVector) ObservationSpace() Space { return v.obs }
func (v *AsyncVector) ActionSpace() Space      { return v.act }

// Workers is the number of blocks stepped in parallel: the caller's
// goroutine plus Workers()−1 worker goroutines.
func (v *AsyncVector) Workers() int { return len(v.blocks) }

func (v *AsyncVector) Reset(seed int64) (*Batch, error) {
	if v.closed {
		return nil, fmt.Errorf("%w: AsyncVector.Reset", ErrClosed)
	}
	v.job, v.seed = jobReset, seed
	if err := v.run(); err != nil {
		return nil, err
	}
	return &v.batch, nil
}

func (v *AsyncVector) Step(actions []float32) (*Batch, error) {
	if v.closed {
		return nil, fmt.Errorf("%w: AsyncVector.Step", ErrClosed)
	}
	if err := CheckActions(v.act, len(v.envs), actions); err != nil {
		return nil, err
	}
	v.job, v.actions = jobStep, actions
	err := v.run()
	v.actions = nil // do not keep the caller's slice
	if err != nil {
		return nil, err
	}
	return &v.batch, nil
}

// Close stops the workers, waits for them to exit, then closes the envs.
func (v *AsyncVector) Close() error {
	if v.closed {
		return nil
	}
	v.closed = true
	for _, p := range v.pairs {
		p.Close()
	}
	var errs []error
	for _, e := range v.envs {
		errs = append(errs, e.Close())
	}
	return errors.Join(errs...)
}

// Env returns env i, e.g. to read a wrapper's statistics. Use it only
// between calls to Step or Reset.
func (v *AsyncVector) Env(i int) Env { return v.envs[i] }
