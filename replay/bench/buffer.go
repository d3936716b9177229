package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"herd/internal/rng"
	"herd/replay"
)

// CartPole-sized transitions: 4 float32 observations, one discrete action.
const (
	obsSize = 4
	actSize = 1
)

// BufferConfig drives BufferRows.
type BufferConfig struct {
	Capacities []int
	Fanouts    []int
	Variants   []replay.Locking
	// Batch is the learner batch (sample, update) and the single-thread
	// insert batch; in the mixed workload actors insert ActorBatch.
	Batch      int
	ActorBatch int
	// Threads lists the goroutine counts of the mixed workload: T
	// goroutines are T/2 learners (at least 1) and T − T/2 actors; T = 1
	// alternates both roles in one goroutine.
	Threads []int
	// Ratio is the samples-per-insert ratio held by a replay.RateLimiter
	// in the mixed workload (so both variants do the same mix of work);
	// 0 runs actors and learners free.
	Ratio float64
	// Ops selects among insert, sample, update (one goroutine) and mixed.
	Ops     []string
	Seconds float64 // per (configuration, op)
	Stat    Stat
	Seed    uint64
}

// BufferRows measures the whole Prioritized buffer.
func BufferRows(ctx context.Context, cfg BufferConfig) ([]Row, error) {
	if cfg.Batch < 1 || cfg.ActorBatch < 1 {
		return nil, fmt.Errorf("bench: batch %d / actor batch %d < 1", cfg.Batch, cfg.ActorBatch)
	}
	var rows []Row
	want := map[string]bool{}
	for _, op := range cfg.Ops {
		switch op {
		case "insert", "sample", "update", "mixed":
			want[op] = true
		default:
			return nil, fmt.Errorf("bench: unknown buffer op %q (want insert, sample, update, mixed)", op)
		}
	}
	for _, n := range cfg.Capacities {
		if cfg.Batch > n || cfg.ActorBatch > n {
			return nil, fmt.Errorf("bench: batch %d / actor batch %d larger than capacity %d", cfg.Batch, cfg.ActorBatch, n)
		}
		for _, k := range cfg.Fanouts {
			bufs := make([]*replay.Prioritized, len(cfg.Variants))
			row := func(v replay.Locking, op string, threads int, ns, items float64) Row {
				return Row{Variant: v.String(), Fanout: k, Capacity: n, Batch: cfg.Batch, Threads: threads,
					Op: op, NsPerOp: ns, ItemsPerS: items}
			}
			for vi, v := range cfg.Variants {
				if ctx.Err() != nil {
					return rows, ctx.Err()
				}
				buf, err := filledBuffer(n, k, v, cfg.Seed)
				if err != nil {
					return nil, err
				}
				bufs[vi] = buf
				for _, op := range []string{"insert", "sample", "update"} {
					if !want[op] {
						continue
					}
					ns, err := singleOp(buf, op, cfg)
					if err != nil {
						return nil, err
					}
					rows = append(rows, row(v, op, 1, ns, float64(cfg.Batch)*1e9/ns))
				}
			}
			if !want["mixed"] {
				continue
			}
			// The variants run in alternating windows so that load from
			// other processes falls on all of them alike.
			for _, th := range cfg.Threads {
				nsXs := make([][]float64, len(bufs))
				itXs := make([][]float64, len(bufs))
				deadline := time.Now().Add(time.Duration(cfg.Seconds * float64(len(bufs)) * float64(time.Second)))
				for round := 0; round < 3 || time.Now().Before(deadline); round++ {
					if ctx.Err() != nil {
						return rows, ctx.Err()
					}
					for vi, buf := range bufs {
						ns, items, err := mixedWindow(buf, th, cfg, round)
						if err != nil {
							return nil, err
						}
						nsXs[vi] = append(nsXs[vi], ns)
						itXs[vi] = append(itXs[vi], -items) // reduce(−x): min → best throughput
					}
				}
				for vi, v := range cfg.Variants {
					rows = append(rows, row(v, "mixed", th, reduce(nsXs[vi], cfg.Stat), -reduce(itXs[vi], cfg.Stat)))
				}
			}
		}
	}
	return rows, nil
}

// filledBuffer returns a Prioritized buffer filled to capacity with
// random priorities.
func filledBuffer(n, k int, v replay.Locking, seed uint64) (*replay.Prioritized, error) {
	buf, err := replay.NewPrioritized(replay.Config{Capacity: n, ObsSize: obsSize, ActSize: actSize, Fanout: k, Locking: v})
	if err != nil {
		return nil, err
	}
	r := rng.New(seed, "bench/fill", 0)
	b := cartPoleBatch(min(n, 4096), r)
	idx := make([]int, b.Len())
	gen := make([]uint64, b.Len())
	pr := make([]float64, b.Len())
	for pos := 0; pos < n; pos += b.Len() {
		m := min(b.Len(), n-pos)
		part := b
		if m < b.Len() {
			part = cartPoleBatch(m, r)
		}
		if err := buf.Add(part); err != nil {
			return nil, err
		}
		for i := 0; i < m; i++ {
			idx[i], gen[i], pr[i] = pos+i, 1, r.Float64()+1e-3
		}
		if _, err := buf.UpdatePriorities(idx[:m], gen[:m], pr[:m]); err != nil {
			return nil, err
		}
	}
	return buf, nil
}

type randT = rand.Rand

type uniformSource interface{ Float32() float32 }

func cartPoleBatch(n int, r uniformSource) *replay.Batch {
	b := &replay.Batch{}
	b.Resize(n, obsSize, actSize)
	for i := range b.Obs {
		b.Obs[i] = r.Float32()
		b.NextObs[i] = r.Float32()
	}
	for i := range b.Reward {
		b.Reward[i] = 1
		b.Action[i] = float32(i % 2)
	}
	return b
}

// singleOp times one op on one goroutine in windows and reduces them.
func singleOp(buf *replay.Prioritized, op string, cfg BufferConfig) (float64, error) {
	r := rng.New(cfg.Seed, "bench/buffer/"+op, 0)
	b := cartPoleBatch(cfg.Batch, r)
	var s replay.Sample
	pr := make([]float64, cfg.Batch)
	for i := range pr {
		pr[i] = r.Float64() + 1e-3
	}
	if err := buf.Sample(&s, cfg.Batch, r); err != nil {
		return 0, err
	}
	var f func()
	switch op {
	case "insert":
		f = func() { _ = buf.Add(b) }
	case "sample":
		f = func() { _ = buf.Sample(&s, cfg.Batch, r) }
	case "update":
		f = func() { _, _ = buf.UpdatePriorities(s.Index, s.Gen, pr) }
	}
	reps := calibrate(f)
	var xs []float64
	deadline := time.Now().Add(time.Duration(cfg.Seconds * float64(time.Second)))
	for w := 0; w < 3 || time.Now().Before(deadline); w++ {
		if op == "update" {
			_ = buf.Sample(&s, cfg.Batch, r) // fresh generations
		}
		start := time.Now()
		for i := 0; i < reps; i++ {
			f()
		}
		xs = append(xs, float64(time.Since(start).Nanoseconds())/float64(reps))
	}
	return reduce(xs, cfg.Stat), nil
}

// mixedWindow runs T goroutines (T/2 learners sampling and updating
// Batch, the rest actors inserting ActorBatch; T = 1 alternates both) on
// buf for one 250 ms window, with the samples-per-insert ratio held by a
// rate limiter when cfg.Ratio > 0, and returns the wall time per learner
// batch and the throughput in items (inserted + sampled) per second.
func mixedWindow(buf *replay.Prioritized, threads int, cfg BufferConfig, round int) (nsPerOp, itemsPerS float64, err error) {
	if threads < 1 {
		return 0, 0, fmt.Errorf("bench: threads %d < 1", threads)
	}
	learners := max(1, threads/2)
	actors := threads - learners
	var learned, inserted atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	var failed atomic.Value
	learn := func(s *replay.Sample, pr []float64, r *randT) {
		if err := buf.Sample(s, cfg.Batch, r); err != nil {
			failed.Store(err)
			return
		}
		for i := range pr {
			pr[i] = r.Float64() + 1e-3
		}
		_, _ = buf.UpdatePriorities(s.Index, s.Gen, pr)
		learned.Add(1)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var lim *replay.RateLimiter
	if cfg.Ratio > 0 && actors > 0 {
		lim, err = replay.NewRateLimiter(replay.RateLimiterConfig{SamplesPerInsert: cfg.Ratio, MinSizeToSample: 1,
			ErrorBuffer: 4 * max(float64(cfg.Batch), cfg.Ratio*float64(cfg.ActorBatch))})
		if err != nil {
			return 0, 0, err
		}
	}
	await := func(insert bool) bool {
		if lim == nil {
			return true
		}
		if insert {
			return lim.AwaitInsert(ctx, cfg.ActorBatch) == nil
		}
		return lim.AwaitSample(ctx, cfg.Batch) == nil
	}
	start := time.Now()
	for g := 0; g < threads; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rng.New(cfg.Seed, "bench/mixed", round*1000+g)
			b := cartPoleBatch(cfg.ActorBatch, r)
			var s replay.Sample
			pr := make([]float64, cfg.Batch)
			for !stop.Load() {
				switch {
				case actors == 0: // one goroutine, both roles
					_ = buf.Add(b)
					inserted.Add(int64(cfg.ActorBatch))
					learn(&s, pr, r)
				case g < learners:
					if await(false) {
						learn(&s, pr, r)
					}
				default:
					if await(true) {
						_ = buf.Add(b)
						inserted.Add(int64(cfg.ActorBatch))
					}
				}
			}
		}()
	}
	time.Sleep(250 * time.Millisecond)
	stop.Store(true)
	cancel() // wakes goroutines blocked in the rate limiter
	wg.Wait()
	el := time.Since(start)
	if e, ok := failed.Load().(error); ok {
		return 0, 0, e
	}
	dl, di := learned.Load(), inserted.Load()
	if dl == 0 {
		return 0, 0, fmt.Errorf("bench: learners made no progress")
	}
	return float64(el.Nanoseconds()) / float64(dl), float64(dl*int64(cfg.Batch)+di) / el.Seconds(), nil
}
