package worker

import (
	"math"
	"slices"
	"sync"
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

// PolicyTiming counts a policy worker's batches: totals, and percentiles
// over the most recent ones. Safe for concurrent use.
type PolicyTiming struct {
	// Busy is the time in forward passes (weights loads included), in
	// nanoseconds; Batches, Requests and Rows count what was answered.
	Busy                    atomic.Int64
	Batches, Requests, Rows atomic.Int64

	mu   sync.Mutex
	rows []uint32 // rows per batch, a ring of the last recentBatches
	lat  []int64  // µs from arrival to answer per request, a ring
	nr   int      // batches recorded (ring position)
	nl   int      // latencies recorded
}

// recentBatches is how many recent batches (and requests) the percentiles
// cover.
const recentBatches = 4096

// record counts one answered batch of rows rows whose requests arrived at
// arrived, answered at now.
func (p *PolicyTiming) record(rows int, arrived []time.Time, now time.Time, busy time.Duration) {
	p.Busy.Add(int64(busy))
	p.Batches.Add(1)
	p.Requests.Add(int64(len(arrived)))
	p.Rows.Add(int64(rows))
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rows == nil {
		p.rows, p.lat = make([]uint32, recentBatches), make([]int64, recentBatches)
	}
	p.rows[p.nr%recentBatches] = uint32(rows)
	p.nr++
	for _, a := range arrived {
		if a.IsZero() {
			continue
		}
		p.lat[p.nl%recentBatches] = now.Sub(a).Microseconds()
		p.nl++
	}
}

// Percentiles returns the 50th and 99th percentiles of the recent batches'
// rows and of their requests' latency in µs (zeros before any).
func (p *PolicyTiming) Percentiles() (rowsP50, rowsP99 uint32, latP50, latP99 uint64) {
	p.mu.Lock()
	rows := slices.Clone(p.rows[:min(p.nr, recentBatches)])
	lat := slices.Clone(p.lat[:min(p.nl, recentBatches)])
	p.mu.Unlock()
	slices.Sort(rows)
	slices.Sort(lat)
	if len(rows) > 0 {
		rowsP50, rowsP99 = rows[quantileIndex(len(rows), 0.5)], rows[quantileIndex(len(rows), 0.99)]
	}
	if len(lat) > 0 {
		latP50, latP99 = uint64(max(lat[quantileIndex(len(lat), 0.5)], 0)), uint64(max(lat[quantileIndex(len(lat), 0.99)], 0))
	}
	return
}

// quantileIndex is the nearest-rank index of quantile q among n sorted
// values: the smallest index i with (i+1)/n ≥ q.
func quantileIndex(n int, q float64) int {
	i := int(math.Ceil(q*float64(n))) - 1
	return min(max(i, 0), n-1)
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
