package replaysvc

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"

	"herd/replay/persist"
	"herd/service"
)

// BenchConfig configures Bench (the logic behind `herd bench remote
// replay`).
type BenchConfig struct {
	// Addr of the server; empty serves a fresh store (Mode, in a temporary
	// directory) in this process on a loopback port. A given server must
	// have a sampler named "uniform" that needs no fields.
	Addr string
	Mode persist.Mode
	// ValueBytes per record (default 1 kB and 43 kB) and Clients pushing or
	// sampling at once (default 1 and 8).
	ValueBytes []int
	Clients    []int
	// Ops is the number of calls per phase, split among the clients
	// (default 4000); SampleBatch the records per Sample call (default 32).
	Ops, SampleBatch int
}

// BenchRow is one phase: Op "push" (one record per call) or "sample"
// (SampleBatch records per call) with Clients concurrent clients.
type BenchRow struct {
	Op         string  `json:"op"`
	ValueBytes int     `json:"value_bytes"`
	Clients    int     `json:"clients"`
	Batch      int     `json:"records_per_call"`
	OpsPerS    float64 `json:"calls_per_s"`
	MBPerS     float64 `json:"value_mb_per_s"`
	P50US      float64 `json:"p50_us"`
	P99US      float64 `json:"p99_us"`
}

// Bench measures push and sample calls per second and their latency
// percentiles through the Go client.
func Bench(ctx context.Context, cfg BenchConfig) ([]BenchRow, error) {
	if len(cfg.ValueBytes) == 0 {
		cfg.ValueBytes = []int{1 << 10, 43 << 10}
	}
	if len(cfg.Clients) == 0 {
		cfg.Clients = []int{1, 8}
	}
	if cfg.Ops <= 0 {
		cfg.Ops = 4000
	}
	if cfg.SampleBatch <= 0 {
		cfg.SampleBatch = 32
	}
	var rows []BenchRow
	for _, vb := range cfg.ValueBytes {
		for _, nc := range cfg.Clients {
			r, err := benchCase(ctx, cfg, vb, nc)
			if err != nil {
				return rows, err
			}
			rows = append(rows, r...)
		}
	}
	return rows, nil
}

// benchCase measures one value size and client count, on a fresh store
// when Bench serves its own.
func benchCase(ctx context.Context, cfg BenchConfig, vb, nc int) ([]BenchRow, error) {
	addr := cfg.Addr
	if addr == "" {
		a, stop, err := serveTemp(ctx, cfg.Mode)
		if err != nil {
			return nil, err
		}
		defer stop()
		addr = a
	}
	clients := make([]*Client, nc)
	for i := range clients {
		c, err := Dial(addr, ClientOptions{})
		if err != nil {
			return nil, err
		}
		defer c.Close()
		clients[i] = c
	}
	value := make([]byte, vb)
	for i := range value {
		value[i] = byte(i)
	}
	id := time.Now().UnixNano() // keys unique across runs against one server
	push := func(c, i int) error {
		return clients[c].Push(ctx, []Record{{Key: fmt.Sprintf("bench-%d-%d-%d", id, c, i), Value: value}})
	}
	sample := func(c, _ int) error {
		recs, err := clients[c].Sample(ctx, cfg.SampleBatch, "uniform")
		if err == nil && len(recs) != cfg.SampleBatch {
			err = fmt.Errorf("replaysvc: bench: sample returned %d of %d", len(recs), cfg.SampleBatch)
		}
		return err
	}
	var rows []BenchRow
	for _, ph := range []struct {
		op    string
		batch int
		call  func(c, i int) error
	}{{"push", 1, push}, {"sample", cfg.SampleBatch, sample}} {
		lat, wall, err := run(nc, cfg.Ops, ph.call)
		if err != nil {
			return rows, err
		}
		ops := float64(len(lat)) / wall.Seconds()
		rows = append(rows, BenchRow{Op: ph.op, ValueBytes: vb, Clients: nc, Batch: ph.batch, OpsPerS: ops,
			MBPerS: ops * float64(ph.batch*vb) / 1e6, P50US: pct(lat, 0.50), P99US: pct(lat, 0.99)})
	}
	return rows, nil
}

// run makes ops calls split among nc goroutines and returns each call's
// latency in µs and the wall time.
func run(nc, ops int, call func(c, i int) error) ([]float64, time.Duration, error) {
	lat := make([][]float64, nc)
	errs := make([]error, nc)
	var wg sync.WaitGroup
	start := time.Now()
	for c := range nc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := c; i < ops; i += nc {
				t0 := time.Now()
				if err := call(c, i); err != nil {
					errs[c] = err
					return
				}
				lat[c] = append(lat[c], float64(time.Since(t0).Microseconds()))
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	for _, err := range errs {
		if err != nil {
			return nil, 0, err
		}
	}
	return slices.Concat(lat...), wall, nil
}

func pct(xs []float64, q float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// serveTemp serves a fresh store with one uniform sampler in a temporary
// directory on a loopback port; stop ends the server and removes the
// directory.
func serveTemp(ctx context.Context, mode persist.Mode) (string, func(), error) {
	dir, err := os.MkdirTemp("", "herd-bench-replay-")
	if err != nil {
		return "", nil, err
	}
	samplers := []persist.Sampler{persist.NewUniform("uniform")}
	opts := persist.Options{Mode: mode, Dir: filepath.Join(dir, "store"), Samplers: samplers}
	opts.EnsureDefaults()
	store, err := persist.Open(ctx, opts)
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	srv, err := New(Config{Store: store, Samplers: samplers, Mode: mode, MaxValueBytes: opts.MaxValueBytes})
	if err != nil {
		store.Close()
		os.RemoveAll(dir)
		return "", nil, err
	}
	lis, err := service.Listen("127.0.0.1:0")
	if err != nil {
		store.Close()
		os.RemoveAll(dir)
		return "", nil, err
	}
	g := grpc.NewServer(service.ServerOptions(nil, 0)...)
	srv.Register(g)
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- service.Serve(sctx, g, lis, time.Second) }()
	return lis.Addr().String(), func() {
		cancel()
		<-done
		store.Close()
		os.RemoveAll(dir)
	}, nil
}
