//go:build linux

package envsvc

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"herd/algo"
	"herd/internal/pyproc"
	"herd/run/hts"
)

// htsRemote trains configs/ppo-cartpole-hts-remote.yaml on envID for
// segments segments under HTS (sync false) or the synchronous baseline.
func htsRemote(tb testing.TB, envID string, segments int, sync bool, envWorkers int) (time.Duration, algo.Model) {
	tb.Helper()
	res := resolveConfig(tb, "ppo-cartpole-hts-remote.yaml", envID)
	h := res.Header
	n, T, _ := res.Config.(algo.Rollout).RolloutShape()
	h.Steps = int64(segments * n * T)
	opt := hts.OptionsOf(h)
	opt.Sync = sync
	if envWorkers > 0 {
		opt.EnvWorkers = envWorkers
	}
	t0 := time.Now()
	m, err := hts.Train(context.Background(), &algo.Runtime{Header: h, Log: algo.Discard()}, res.Spec, res.Config, opt)
	if err != nil {
		tb.Fatal(err)
	}
	return time.Since(t0), m
}

// TestHTSRemote: HTS trains on envs served by the Python server, over gRPC
// and over shared memory, and ends with the same parameters either way and
// with 4 or 16 env workers.
func TestHTSRemote(t *testing.T) {
	if testing.Short() {
		t.Skip("trains PPO on 16 Python envs")
	}
	name := shmName(t)
	p := pyproc.Start(t, "herd_env.serve", "--env", "pycartpole:CartPole", "--id", "CartPole", "--shm", name)
	_, a := htsRemote(t, "grpc://"+p.Addr()+"/CartPole?timeout=60s", 1, false, 0)
	_, b := htsRemote(t, "shm://"+name+"/CartPole?timeout=60s", 1, false, 4)
	flat := func(m algo.Model) []float32 {
		pm, ok := m.(algo.ParamModel)
		if !ok {
			t.Fatalf("%T has no parameters", m)
		}
		var out []float32
		for _, p := range pm.Params() {
			out = append(out, p.Value...)
		}
		return out
	}
	pa, pb := flat(a), flat(b)
	if len(pa) == 0 || len(pa) != len(pb) {
		t.Fatalf("parameters: %d and %d values", len(pa), len(pb))
	}
	for i := range pa {
		if pa[i] != pb[i] {
			t.Fatalf("parameter %d: %v over gRPC, %v over shm with 4 env workers", i, pa[i], pb[i])
		}
	}
}

// BenchmarkHTSRemote: PPO collection under HTS against the synchronous
// baseline on 16 envs served by herd_env.serve whose steps take a
// log-normal time of mean 1 ms, CV 2 (herd_env.testenvs:Jittery around a
// pure-Python CartPole), over gRPC and shared memory; 3 segments of 16×128
// steps per run, the two modes alternating. Reports env steps/s of each and
// the ratio.
func BenchmarkHTSRemote(b *testing.B) {
	name := fmt.Sprintf("herdbench-%d", os.Getpid())
	p := pyproc.Start(b, "herd_env.serve", "--env", "herd_env.testenvs:Jittery", "--id", "CartPole",
		"--kwargs", `{"env": "pycartpole:CartPole", "mean_ms": 1, "cv": 2}`, "--shm", name)
	for _, tr := range []struct{ name, id string }{
		{"grpc", "grpc://" + p.Addr() + "/CartPole?timeout=60s"},
		{"shm", "shm://" + name + "/CartPole?timeout=60s"},
	} {
		b.Run(tr.name, func(b *testing.B) {
			const segments = 3
			var syncT, htsT time.Duration
			for i := 0; i < b.N; i++ {
				for _, sync := range []bool{i%2 == 0, i%2 != 0} {
					d, _ := htsRemote(b, tr.id, segments, sync, 0)
					if sync {
						syncT += d
					} else {
						htsT += d
					}
				}
			}
			steps := float64(b.N * segments * 16 * 128)
			b.ReportMetric(steps/syncT.Seconds(), "sync-steps/s")
			b.ReportMetric(steps/htsT.Seconds(), "hts-steps/s")
			b.ReportMetric(syncT.Seconds()/htsT.Seconds(), "speedup")
		})
	}
}
