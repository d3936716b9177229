package bench

import (
	"context"
	"fmt"
	"math"
	"time"

	"herd/internal/rng"
	"herd/replay/sumtree"
)

// SafetyConfig drives Safety.
type SafetyConfig struct {
	Capacity int     // tree slots
	Filled   int     // slots [0, Filled) get priorities; the rest stay 0
	Draws    int64   // total draws
	Batch    int     // draws per SampleTo, and priorities set between two
	Fanout   int     // K
	Seed     uint64  //
	Seconds  float64 // stop early after this long (0: no limit)
	// Decades is the spread of the log-uniform priorities: 10^x for x
	// uniform in [hi-Decades, hi], hi = min(Decades/2, 38) so none
	// passes sumtree.MaxPriority (0 means 12: 1e-6 … 1e6). 83 spans
	// 1e-45 … 1e38, the float32 leaves' whole range and below it.
	Decades float64
}

// SafetyRow is the result of Safety.
type SafetyRow struct {
	Fanout   int     `json:"fanout"`
	Decades  float64 `json:"decades"`
	Capacity int     `json:"capacity"`
	Filled   int     `json:"filled"`
	Draws    int64   `json:"draws"`
	Updates  int64   `json:"updates"`
	Outside  int64   `json:"outside"`       // draws ≥ Filled or < 0
	ZeroPrio int64   `json:"zero_priority"` // draws of a zero-priority slot
	Drift    float64 `json:"final_drift"`   // relative, no rebuild during the run
	Seconds  float64 `json:"seconds"`
}

// Safety is the numerical-safety run: draws on a large tree
// under continuous random updates (log-uniform priorities over
// cfg.Decades decades and 10% zeros, which is what makes float sums
// drift), with no rebuild,
// counting draws that land outside [0, Filled) or on a zero priority.
// The PAL paper's float32 C++ tree returned 206 such indices in 576M draws on
// a 1e7 tree.
func Safety(ctx context.Context, cfg SafetyConfig) (SafetyRow, error) {
	if cfg.Filled <= 0 || cfg.Filled > cfg.Capacity || cfg.Batch < 1 {
		return SafetyRow{}, fmt.Errorf("bench: safety: need 0 < filled %d ≤ capacity %d and batch %d ≥ 1", cfg.Filled, cfg.Capacity, cfg.Batch)
	}
	t, err := sumtree.New(cfg.Capacity, cfg.Fanout)
	if err != nil {
		return SafetyRow{}, err
	}
	r := rng.New(cfg.Seed, "bench/safety", 0)
	dec := cfg.Decades
	if dec == 0 {
		dec = 12
	}
	if !(dec > 0 && dec <= 400) {
		return SafetyRow{}, fmt.Errorf("bench: safety: decades %v not in (0, 400]", cfg.Decades)
	}
	hi := min(dec/2, 38)
	prio := func() float64 {
		if r.IntN(10) == 0 {
			return 0
		}
		return math.Pow(10, hi-dec+dec*r.Float64())
	}
	idx := make([]int, 4096)
	p := make([]float64, 4096)
	for off := 0; off < cfg.Filled; off += len(idx) {
		m := min(len(idx), cfg.Filled-off)
		for i := 0; i < m; i++ {
			idx[i], p[i] = off+i, prio()
		}
		t.SetBatch(idx[:m], p[:m])
	}
	row := SafetyRow{Fanout: t.Fanout(), Decades: dec, Capacity: cfg.Capacity, Filled: cfg.Filled}
	dst := make([]int, cfg.Batch)
	idx, p = idx[:cfg.Batch], p[:cfg.Batch]
	start := time.Now()
	for row.Draws < cfg.Draws {
		if ctx.Err() != nil || (cfg.Seconds > 0 && time.Since(start).Seconds() > cfg.Seconds) {
			break
		}
		for i := range idx {
			idx[i], p[i] = r.IntN(cfg.Filled), prio()
		}
		t.SetBatch(idx, p)
		row.Updates += int64(len(idx))
		t.SampleTo(dst, r)
		for _, i := range dst {
			switch {
			case i < 0 || i >= cfg.Filled:
				row.Outside++
			case t.Get(i) <= 0:
				row.ZeroPrio++
			}
		}
		row.Draws += int64(len(dst))
	}
	row.Seconds = time.Since(start).Seconds()
	row.Drift = t.Drift()
	return row, nil
}
