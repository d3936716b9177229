package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"herd/internal/rng"
	"herd/replay/sumtree"
)

// Row is one line of `herd bench replay`: ns_per_op is the time of one
// batch operation (B priorities set, B draws, one insert/sample/update of B
// transitions), items_per_s is B·1e9/ns_per_op times the thread count.
type Row struct {
	Variant   string  `json:"variant"`
	Fanout    int     `json:"fanout"`
	Capacity  int     `json:"capacity"`
	Batch     int     `json:"batch"`
	Threads   int     `json:"threads"`
	Op        string  `json:"op"`
	NsPerOp   float64 `json:"ns_per_op"`
	ItemsPerS float64 `json:"items_per_s"`
}

// Stat selects how the per-window timings of one configuration are reduced
// to ns_per_op.
type Stat string

const (
	// Median is robust to the occasional window disturbed by other
	// processes.
	Median Stat = "median"
	// Min is the least disturbed window: the best estimate of what the
	// code costs on an idle core, on a shared machine.
	Min Stat = "min"
)

func reduce(xs []float64, s Stat) float64 {
	slices.Sort(xs)
	if s == Min {
		return xs[0]
	}
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}

// TreeConfig drives TreeRows.
type TreeConfig struct {
	Capacities []int
	Fanouts    []int
	Batch      int
	// Seconds is the measuring time per capacity, shared by all fanouts
	// and both ops.
	Seconds float64
	Stat    Stat
	Seed    uint64
}

// treeCase is one (capacity, fanout) tree with its pre-drawn set inputs.
type treeCase struct {
	k    int
	t    *sumtree.Tree
	idx  []int
	p    []float64
	dst  []int
	r    *rand.Rand
	off  int
	set  []float64 // ns per batch, one per window
	samp []float64
}

const treeRounds = 1024 // distinct pre-drawn batches for tree_set

// TreeRows measures tree_set and tree_sample for every capacity and
// fanout. For one capacity, the fanouts are measured in interleaved
// windows (round robin, each window a few milliseconds), so load from
// other processes spreads evenly over them and their ratios are fair. A
// cancelled ctx stops it between windows, with ctx's error.
func TreeRows(ctx context.Context, cfg TreeConfig) ([]Row, error) {
	if cfg.Batch < 1 {
		return nil, fmt.Errorf("bench: batch %d < 1", cfg.Batch)
	}
	var rows []Row
	for _, n := range cfg.Capacities {
		cases := make([]*treeCase, 0, len(cfg.Fanouts))
		for _, k := range cfg.Fanouts {
			c, err := newTreeCase(n, k, cfg.Batch, cfg.Seed)
			if err != nil {
				return nil, err
			}
			cases = append(cases, c)
		}
		// Calibrate: batches per window so one window is ~5 ms per op.
		setReps := make([]int, len(cases))
		sampReps := make([]int, len(cases))
		for i, c := range cases {
			setReps[i] = calibrate(func() { c.doSet(cfg.Batch) })
			sampReps[i] = calibrate(c.doSample)
		}
		deadline := time.Now().Add(time.Duration(cfg.Seconds * float64(time.Second)))
		for round := 0; round < 3 || time.Now().Before(deadline); round++ {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			for i, c := range cases {
				c.measure(setReps[i], sampReps[i], cfg.Batch)
			}
		}
		for _, c := range cases {
			for _, op := range []struct {
				name string
				xs   []float64
			}{{"tree_set", c.set}, {"tree_sample", c.samp}} {
				ns := reduce(op.xs, cfg.Stat)
				rows = append(rows, Row{Variant: "tree", Fanout: c.k, Capacity: n, Batch: cfg.Batch, Threads: 1,
					Op: op.name, NsPerOp: ns, ItemsPerS: float64(cfg.Batch) * 1e9 / ns})
			}
		}
	}
	return rows, nil
}

func newTreeCase(n, k, batch int, seed uint64) (*treeCase, error) {
	t, err := sumtree.New(n, k)
	if err != nil {
		return nil, err
	}
	r := rng.New(seed, "bench/tree", k)
	all := make([]int, n)
	allP := make([]float64, n)
	for i := range all {
		all[i] = i
		allP[i] = r.Float64() + 1e-3
	}
	t.SetBatch(all, allP)
	t.Rebuild()
	c := &treeCase{k: k, t: t, r: r, dst: make([]int, batch),
		idx: make([]int, batch*treeRounds), p: make([]float64, batch*treeRounds)}
	for i := range c.idx {
		c.idx[i] = r.IntN(n)
		c.p[i] = r.Float64() + 1e-3
	}
	return c, nil
}

func (c *treeCase) doSet(batch int) {
	o := c.off * batch
	c.t.SetBatch(c.idx[o:o+batch], c.p[o:o+batch])
	c.off = (c.off + 1) % treeRounds
}

func (c *treeCase) doSample() { c.t.SampleTo(c.dst, c.r) }

// measure times one window of each op, after a warm-up of a quarter
// window that brings this tree back into cache (the windows of the other
// fanouts evicted it): the figure is the warm steady state, as a learner
// that samples continuously sees it.
func (c *treeCase) measure(setReps, sampReps, batch int) {
	for i := 0; i < setReps/4; i++ {
		c.doSet(batch)
	}
	start := time.Now()
	for i := 0; i < setReps; i++ {
		c.doSet(batch)
	}
	c.set = append(c.set, float64(time.Since(start).Nanoseconds())/float64(setReps))
	for i := 0; i < sampReps/4; i++ {
		c.doSample()
	}
	start = time.Now()
	for i := 0; i < sampReps; i++ {
		c.doSample()
	}
	c.samp = append(c.samp, float64(time.Since(start).Nanoseconds())/float64(sampReps))
}

// window is the length of one timed window.
const window = 5 * time.Millisecond

// calibrate returns how many calls of f fill one window.
func calibrate(f func()) int {
	start := time.Now()
	m := 0
	for time.Since(start) < 20*time.Millisecond {
		f()
		m++
	}
	per := time.Since(start) / time.Duration(m)
	return max(1, int(window/per))
}
