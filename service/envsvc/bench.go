package envsvc

import (
	"context"
	"fmt"
	"slices"
	"time"

	"google.golang.org/grpc"

	"herd/env"
	"herd/env/remote"
	"herd/internal/rng"
	"herd/service"
)

// BenchConfig configures Bench (the logic behind `herd bench remote env`).
type BenchConfig struct {
	// Addr of the server to measure; empty starts herd's own server in this
	// process on a loopback port.
	Addr string
	// Shm, when set, measures the server's shared-memory transport under
	// this name (shm://Shm/EnvID) instead of gRPC; Addr is then unused.
	Shm string
	// Inflight splits each vector into this many sessions in flight
	// (the remote id's inflight=K; default 1).
	Inflight int
	// EnvID on the server (default CartPole-v1); LocalID is the herd env
	// the local rows step (default EnvID).
	EnvID, LocalID string
	// NumEnvs per message (default 1, 16, 64).
	NumEnvs []int
	// Duration of each measurement (default 1 s) and Rounds of alternating
	// local and remote measurements (default 3); rows give medians.
	Duration time.Duration
	Rounds   int
	Seed     uint64
}

// BenchRow is one vector size: env steps per second (summed over envs)
// stepping a local SyncVector and the same number of envs through the
// server, one message per batch, with random actions drawn in advance.
type BenchRow struct {
	Env          string  `json:"env"`
	NumEnvs      int     `json:"num_envs"`
	LocalStepsS  float64 `json:"local_steps_per_s"`
	RemoteStepsS float64 `json:"remote_steps_per_s"`
	Slowdown     float64 `json:"local_over_remote"`
	// RemoteStepUS is the median round trip of one Step message, µs.
	RemoteStepUS float64 `json:"remote_step_us"`
}

// Bench measures local against remote stepping, alternating the two in
// every round so that load from other processes affects both alike.
func Bench(ctx context.Context, cfg BenchConfig) ([]BenchRow, error) {
	if cfg.EnvID == "" {
		cfg.EnvID = "CartPole-v1"
	}
	if cfg.LocalID == "" {
		cfg.LocalID = cfg.EnvID
	}
	if len(cfg.NumEnvs) == 0 {
		cfg.NumEnvs = []int{1, 16, 64}
	}
	if cfg.Duration <= 0 {
		cfg.Duration = time.Second
	}
	if cfg.Rounds <= 0 {
		cfg.Rounds = 3
	}
	if cfg.Addr == "" && cfg.Shm == "" {
		lis, err := service.Listen("127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		g := grpc.NewServer(service.ServerOptions(nil, 0)...)
		New(Config{}).Register(g)
		sctx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- service.Serve(sctx, g, lis, time.Second) }()
		defer func() { stop(); <-done }()
		cfg.Addr = lis.Addr().String()
	}
	var rows []BenchRow
	for _, n := range cfg.NumEnvs {
		row, err := benchOne(ctx, cfg, n)
		if err != nil {
			return rows, err
		}
		rows = append(rows, row)
	}
	return rows, nil
}

func benchOne(ctx context.Context, cfg BenchConfig, n int) (BenchRow, error) {
	local, err := env.MakeVector(cfg.LocalID, n, env.Sync)
	if err != nil {
		return BenchRow{}, err
	}
	defer local.Close()
	id := "grpc://" + cfg.Addr + "/" + cfg.EnvID
	if cfg.Shm != "" {
		id = "shm://" + cfg.Shm + "/" + cfg.EnvID
	}
	if cfg.Inflight > 1 {
		id += fmt.Sprintf("?inflight=%d", cfg.Inflight)
	}
	served, err := env.Maker{Remote: remote.Opener{}}.MakeVector(id, n, env.Sync)
	if err != nil {
		return BenchRow{}, err
	}
	defer served.Close()
	if local.ActionSpace().Dim() != served.ActionSpace().Dim() {
		return BenchRow{}, fmt.Errorf("envsvc: bench: local %v and remote %v action spaces differ", local.ActionSpace(), served.ActionSpace())
	}
	const pool = 64 // distinct action batches, cycled
	d := local.ActionSpace().Dim() * n
	acts := make([]float32, pool*d)
	r := rng.New(cfg.Seed, "bench/remote/actions", n)
	for i := 0; i < pool*n; i++ {
		local.ActionSpace().SampleTo(acts[i*d/n:(i+1)*d/n], r)
	}
	var ls, rs []float64
	for round := 0; round < cfg.Rounds; round++ {
		for _, v := range []env.Vector{local, served} {
			if _, err := v.Reset(int64(cfg.Seed)); err != nil {
				return BenchRow{}, err
			}
			calls, err := timed(ctx, cfg.Duration, func(i int) error {
				k := i % pool
				_, err := v.Step(acts[k*d : (k+1)*d])
				return err
			})
			if err != nil {
				return BenchRow{}, err
			}
			if v == local {
				ls = append(ls, calls*float64(n))
			} else {
				rs = append(rs, calls*float64(n))
			}
		}
	}
	l, rm := median(ls), median(rs)
	return BenchRow{Env: cfg.EnvID, NumEnvs: n, LocalStepsS: l, RemoteStepsS: rm, Slowdown: l / rm, RemoteStepUS: 1e6 * float64(n) / rm}, nil
}

// timed calls step until d has passed, reading the clock every 16 calls,
// and returns calls per second.
func timed(ctx context.Context, d time.Duration, step func(i int) error) (float64, error) {
	start := time.Now()
	for n := 0; ; n++ {
		if err := step(n); err != nil {
			return 0, err
		}
		if n%16 == 15 {
			if el := time.Since(start); el >= d {
				return float64(n+1) / el.Seconds(), nil
			}
			if err := ctx.Err(); err != nil {
				return 0, err
			}
		}
	}
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
