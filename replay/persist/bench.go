package persist

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"herd/internal/rng"
)

// BenchConfig drives Bench (herd bench persist).
type BenchConfig struct {
	Modes      []Mode     // default: memory, disk, hybrid
	ValueBytes int        // default 43000 (the seed RFC's workload)
	Keys       int        // default 30000
	CacheMB    int        // hybrid cache; default 256
	SampleN    int        // records per Sample call; default 32
	Reads      int        // Get and Sample calls per mode; default 100000
	Durability Durability // for the push rows
	Dir        string     // parent of the stores; a fresh temp dir under it, removed after
	Seed       uint64
	// Snapshot adds a "push_during_snapshot" row per Pebble-backed mode:
	// push latency while a snapshot of the whole store uploads to a
	// file:// bucket under Dir.
	Snapshot bool
	// Log receives progress lines; nil is silent.
	Log func(format string, args ...any)
}

// BenchRow is one line of `herd bench persist`.
type BenchRow struct {
	Mode       string  `json:"mode"`
	Op         string  `json:"op"`
	ValueBytes int     `json:"value_bytes"`
	Keys       int     `json:"keys"`
	OpsPerS    float64 `json:"ops_per_s"`
	P50us      float64 `json:"p50_us"`
	P99us      float64 `json:"p99_us"`
}

func (c *BenchConfig) defaults() {
	if len(c.Modes) == 0 {
		c.Modes = []Mode{Memory, Disk, Hybrid}
	}
	if c.ValueBytes == 0 {
		c.ValueBytes = 43000
	}
	if c.Keys == 0 {
		c.Keys = 30000
	}
	if c.CacheMB == 0 {
		c.CacheMB = 256
	}
	if c.SampleN == 0 {
		c.SampleN = 32
	}
	if c.Reads == 0 {
		c.Reads = 100000
	}
	if c.Log == nil {
		c.Log = func(string, ...any) {}
	}
}

// Bench measures push, get and sample throughput and latency in each mode.
//
// push: ops_per_s counts a push when the worker has written it to the
// cache or to Pebble (the clock stops after Store.Wait), not when Push
// returns; p50/p99 are Push call latencies, back-pressure included.
// get: uniform random keys. sample: ops_per_s counts records (SampleN per
// call, uniform sampler, values fetched), p50/p99 are per call.
func Bench(ctx context.Context, cfg BenchConfig) ([]BenchRow, error) {
	cfg.defaults()
	if cfg.ValueBytes < 8 || cfg.Keys < 1 || cfg.SampleN < 1 || cfg.Reads < 1 {
		return nil, fmt.Errorf("%w: bench needs value_bytes >= 8 and positive keys, sample size and reads", ErrInvalidOptions)
	}
	root, err := os.MkdirTemp(cfg.Dir, "herd-bench-persist-")
	if err != nil {
		return nil, fmt.Errorf("persist: bench: %w", err)
	}
	defer os.RemoveAll(root)
	// Baseline: what allocating and copying the pushed values costs on
	// this machine with no store at all (fresh memory is first-touched,
	// which is slow on some VMs); the memory-mode push cannot beat it.
	base, err := benchBaseline(ctx, cfg)
	if err != nil {
		return nil, err
	}
	rows := []BenchRow{base}
	for _, m := range cfg.Modes {
		if err := ctx.Err(); err != nil {
			return rows, fmt.Errorf("persist: bench: %w", err)
		}
		rs, err := benchMode(ctx, cfg, m, filepath.Join(root, m.String()))
		rows = append(rows, rs...)
		if err != nil {
			return rows, err
		}
	}
	return rows, nil
}

// benchValues returns 16 random values; push i sends values[i%16] with
// its first 8 bytes set to i, so no two stored values are equal.
func benchValues(cfg BenchConfig) [][]byte {
	r := rng.New(cfg.Seed, "persist/bench/values", 0)
	vs := make([][]byte, 16)
	for i := range vs {
		vs[i] = make([]byte, cfg.ValueBytes)
		for j := range vs[i] {
			vs[i][j] = byte(r.Uint32())
		}
	}
	return vs
}

func benchMode(ctx context.Context, cfg BenchConfig, m Mode, dir string) ([]BenchRow, error) {
	s, err := Open(ctx, Options{Mode: m, Dir: dir, CacheMB: cfg.CacheMB, Durability: cfg.Durability,
		Seed: cfg.Seed, SnapshotURL: snapURL(cfg, dir), SnapshotEvery: -1})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	row := func(op string, ops int, d time.Duration, lat []time.Duration) BenchRow {
		p50, p99 := percentiles(lat)
		return BenchRow{Mode: m.String(), Op: op, ValueBytes: cfg.ValueBytes, Keys: cfg.Keys,
			OpsPerS: float64(ops) / d.Seconds(), P50us: p50, P99us: p99}
	}
	var rows []BenchRow
	vals := benchValues(cfg)
	keys := make([]string, cfg.Keys)
	for i := range keys {
		keys[i] = fmt.Sprintf("key%08d", i)
	}

	// push
	cfg.Log("%s: push %d × %d B", m, cfg.Keys, cfg.ValueBytes)
	lat := make([]time.Duration, 0, cfg.Keys)
	start := time.Now()
	for i, k := range keys {
		v := vals[i%len(vals)]
		v[0], v[1], v[2], v[3] = byte(i), byte(i>>8), byte(i>>16), byte(i>>24)
		if err := stopped(ctx, i); err != nil {
			return rows, err
		}
		t0 := time.Now()
		if err := s.Push(ctx, k, Record{Value: v}); err != nil {
			return rows, err
		}
		lat = append(lat, time.Since(t0))
	}
	if err := s.Wait(ctx); err != nil {
		return rows, err
	}
	rows = append(rows, row("push", cfg.Keys, time.Since(start), lat))
	st := s.Stats()
	cfg.Log("%s: %+v", m, st)

	// get: a throughput pass, then a timed pass for latencies.
	r := rng.New(cfg.Seed, "persist/bench/get", 0)
	start = time.Now()
	for i := 0; i < cfg.Reads; i++ {
		if err := stopped(ctx, i); err != nil {
			return rows, err
		}
		if _, err := s.Get(keys[r.IntN(len(keys))]); err != nil {
			return rows, err
		}
	}
	d := time.Since(start)
	lat = lat[:0]
	for i := 0; i < min(cfg.Reads, 20000); i++ {
		k := keys[r.IntN(len(keys))]
		t0 := time.Now()
		if _, err := s.Get(k); err != nil {
			return rows, err
		}
		lat = append(lat, time.Since(t0))
	}
	rows = append(rows, row("get", cfg.Reads, d, lat))

	// sample
	calls := max(1, cfg.Reads/cfg.SampleN)
	var items []Item
	start = time.Now()
	for i := 0; i < calls; i++ {
		if err := stopped(ctx, i); err != nil {
			return rows, err
		}
		if items, err = s.Sample(items, cfg.SampleN, "uniform"); err != nil {
			return rows, err
		}
	}
	d = time.Since(start)
	lat = lat[:0]
	for i := 0; i < min(calls, 5000); i++ {
		t0 := time.Now()
		if items, err = s.Sample(items, cfg.SampleN, "uniform"); err != nil {
			return rows, err
		}
		lat = append(lat, time.Since(t0))
	}
	rows = append(rows, row(fmt.Sprintf("sample%d", cfg.SampleN), calls*cfg.SampleN, d, lat))

	if cfg.Snapshot && s.bucket != nil {
		r, err := benchSnapshot(ctx, cfg, s, m, vals)
		if err != nil {
			return rows, err
		}
		rows = append(rows, r)
	}
	return rows, nil
}

func snapURL(cfg BenchConfig, dir string) string {
	if !cfg.Snapshot {
		return ""
	}
	return "file://" + filepath.ToSlash(filepath.Join(dir+"-snaps")) + "?create_dir=1&metadata=skip"
}

// benchSnapshot pushes new keys while a snapshot of the whole store
// uploads, and reports those pushes' latencies.
func benchSnapshot(ctx context.Context, cfg BenchConfig, s *Store, m Mode, vals [][]byte) (BenchRow, error) {
	type res struct {
		info SnapshotInfo
		err  error
	}
	done := make(chan res, 1)
	cfg.Log("%s: snapshot of %d keys while pushing", m, s.Len())
	go func() {
		info, err := s.Snapshot(ctx)
		done <- res{info, err}
	}()
	var lat []time.Duration
	start := time.Now()
	var out res
	for i := 0; ; i++ {
		select {
		case out = <-done:
		default:
		}
		if out.err != nil {
			return BenchRow{}, out.err
		}
		if out.info.ID != 0 {
			break
		}
		if err := stopped(ctx, i); err != nil {
			return BenchRow{}, err
		}
		v := vals[i%len(vals)]
		t0 := time.Now()
		if err := s.Push(ctx, fmt.Sprintf("snap%08d", i), Record{Value: v}); err != nil {
			return BenchRow{}, err
		}
		lat = append(lat, time.Since(t0))
	}
	d := time.Since(start)
	cfg.Log("%s: snapshot %+v", m, out.info)
	p50, p99 := percentiles(lat)
	return BenchRow{Mode: m.String(), Op: "push_during_snapshot", ValueBytes: cfg.ValueBytes, Keys: cfg.Keys,
		OpsPerS: float64(len(lat)) / d.Seconds(), P50us: p50, P99us: p99}, nil
}

// stopped returns ctx's error every 256th iteration i of a measuring
// loop: often enough that Ctrl-C stops a bench within milliseconds, rarely
// enough to cost nothing measurable.
func stopped(ctx context.Context, i int) error {
	if i%256 != 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("persist: bench: %w", err)
	}
	return nil
}

func percentiles(lat []time.Duration) (p50, p99 float64) {
	if len(lat) == 0 {
		return 0, 0
	}
	l := slices.Clone(lat)
	slices.Sort(l)
	at := func(q float64) float64 {
		return float64(l[min(len(l)-1, int(q*float64(len(l))))].Nanoseconds()) / 1e3
	}
	return at(0.50), at(0.99)
}

func benchBaseline(ctx context.Context, cfg BenchConfig) (BenchRow, error) {
	v := benchValues(cfg)[0]
	keep := make([][]byte, 0, cfg.Keys)
	start := time.Now()
	for i := 0; i < cfg.Keys; i++ {
		if err := stopped(ctx, i); err != nil {
			return BenchRow{}, err
		}
		keep = append(keep, append([]byte(nil), v...))
	}
	d := time.Since(start)
	return BenchRow{Mode: "baseline", Op: "alloc_copy", ValueBytes: cfg.ValueBytes, Keys: cfg.Keys,
		OpsPerS: float64(len(keep)) / d.Seconds()}, nil
}
