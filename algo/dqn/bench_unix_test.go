//go:build unix

package dqn

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"herd/algo"
)

// BenchmarkCheckpoint measures the checkpoints of configs/dqn-cartpole.yaml
// (CleanRL's dqn.py: 500,000 steps, a replay of 10,000 transitions, full
// from step 10,000 on) through TrainRun. One op is two whole runs in
// alternating order: checkpoint_every's default (100,000 steps: 5
// checkpoints, the last at the end) and checkpoint_every 10^12 (the final
// one only), so their times differ by 4 checkpoints. ckpt-ms and
// ckpt-bytes are per checkpoint of the default runs: the time to gather
// the state (Q-network, target, Adam, streams, the replay, the envs, the
// metrics recorder's state and files) and to write it (encode, fsync,
// rename, drop the oldest), and its size. default-cpu-s and end-cpu-s are
// the median CPU seconds (user + system) of each kind of run, wall-s
// their wall-clock medians, and slowdown-% the default runs' CPU median
// over the others'.
func BenchmarkCheckpoint(b *testing.B) {
	cfg, err := os.ReadFile("../../configs/dqn-cartpole.yaml")
	if err != nil {
		b.Fatal(err)
	}
	cpu := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			b.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	var n int
	var bytes int64
	var took time.Duration
	runs := map[string][]float64{}
	walls := map[string][]float64{}
	run := func(every string) {
		c := string(cfg)
		if every == "end" {
			c += "checkpoint_every: 1000000000000\n"
		}
		out := filepath.Join(b.TempDir(), "run")
		res, err := algo.Resolve([]byte(c), []algo.Spec{Spec()}, algo.Overrides{Out: &out})
		if err != nil {
			b.Fatal(err)
		}
		c0, w0 := cpu(), time.Now()
		_, err = algo.TrainRun(context.Background(), res, algo.RunOptions{Checkpointed: func(c algo.CheckpointInfo) {
			if every == "default" {
				n++
				bytes += int64(c.Bytes)
				took += c.Took
			}
		}})
		if err != nil {
			b.Fatal(err)
		}
		runs[every] = append(runs[every], (cpu() - c0).Seconds())
		walls[every] = append(walls[every], time.Since(w0).Seconds())
	}
	i := 0
	for b.Loop() {
		if i%2 == 0 {
			run("default")
			run("end")
		} else {
			run("end")
			run("default")
		}
		i++
	}
	median := func(xs []float64) float64 {
		s := slices.Sorted(slices.Values(xs))
		if len(s)%2 == 1 {
			return s[len(s)/2]
		}
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	b.ReportMetric(took.Seconds()*1000/float64(n), "ckpt-ms")
	b.ReportMetric(float64(bytes)/float64(n), "ckpt-bytes")
	b.ReportMetric(median(runs["default"]), "default-cpu-s")
	b.ReportMetric(median(runs["end"]), "end-cpu-s")
	b.ReportMetric(median(walls["default"]), "default-wall-s")
	b.ReportMetric(median(walls["end"]), "end-wall-s")
	b.ReportMetric((median(runs["default"])/median(runs["end"])-1)*100, "slowdown-%")
}
