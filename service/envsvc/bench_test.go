package envsvc

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkRemoteVectorStep: one Step message for n CartPole envs through
// herd's server on loopback (ns/op is per message; env-steps/s is n/op).
func BenchmarkRemoteVectorStep(b *testing.B) {
	addr, _ := startServer(b, nil, 0)
	for _, n := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("envs=%d", n), func(b *testing.B) {
			v := resetVector(b, "grpc://"+addr+"/CartPole-v1", n, 1)
			act := make([]float32, n)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				act[i%n] = float32(i & 1)
				if _, err := v.Step(act); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "env-steps/s")
		})
	}
}

// TestBench runs the `herd bench remote env` logic on a tiny budget.
func TestBench(t *testing.T) {
	rows, err := Bench(context.Background(), BenchConfig{NumEnvs: []int{1, 4}, Duration: 20 * time.Millisecond, Rounds: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[1].NumEnvs != 4 || !(rows[0].RemoteStepsS > 0) || !(rows[1].LocalStepsS > 0) {
		t.Fatalf("rows %+v", rows)
	}
}

// BenchmarkRemoteParallelStep: one Step of a FlatVector of simple_spread
// (3 agents) rows, local and through herd's server on loopback in one
// multi-agent session (ns/op is per vector step).
func BenchmarkRemoteParallelStep(b *testing.B) {
	addr, _ := startServer(b, nil, 0)
	wheres := map[string]string{"local": "", "remote": "grpc://" + addr + "/"}
	if shm := shmPrefix(b); shm != "" {
		wheres["shm"] = shm
	}
	for _, envs := range []int{1, 16} {
		for _, where := range []string{"local", "remote", "shm"} {
			prefix, ok := wheres[where]
			if !ok {
				continue
			}
			b.Run(fmt.Sprintf("%s/envs=%d", where, envs), func(b *testing.B) {
				id := prefix + "mpe/simple_spread_v3"
				rows := 3 * envs
				v := resetVector(b, id, rows, 1)
				act := make([]float32, rows)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					act[i%rows] = float32(i % 5)
					if _, err := v.Step(act); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(envs)*float64(b.N)/b.Elapsed().Seconds(), "env-steps/s")
			})
		}
	}
}
