package worker

import (
	"sync/atomic"
	"time"
)

// StepTiming splits env workers' wall time by phase (for profiling: `herd
// worker --cpuprofile` writes it beside the profile). Several env workers
// may share one; every field is a running total.
type StepTiming struct {
	// Env is the time in env Step and Reset calls, Infer the time waiting
	// for inference replies (truncation bootstraps included), Sample the
	// time the sampler took, Push the time encoding and pushing segments,
	// all in nanoseconds.
	Env, Infer, Sample, Push atomic.Int64
	// Steps counts env steps, Requests inference requests.
	Steps, Requests atomic.Int64
}

// PolicyTiming counts a policy worker's batches (for profiling).
type PolicyTiming struct {
	// Busy is the time in forward passes (weights loads included), in
	// nanoseconds; Batches, Requests and Rows count what was answered.
	Busy                    atomic.Int64
	Batches, Requests, Rows atomic.Int64
}

// phase times consecutive phases of one goroutine; a nil *phase (no
// timing asked for) does nothing.
type phase struct{ t time.Time }

func newPhase(on bool) *phase {
	if !on {
		return nil
	}
	return &phase{t: time.Now()}
}

// add adds the time since the last call to c (nil: to nothing).
func (p *phase) add(c *atomic.Int64) {
	if p == nil {
		return
	}
	now := time.Now()
	if c != nil {
		c.Add(int64(now.Sub(p.t)))
	}
	p.t = now
}
