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
	benchCheckpoint(b, "../../configs/dqn-cartpole.yaml", "", algo.Overrides{})
}

// BenchmarkCheckpointMinAtar is BenchmarkCheckpoint for
// configs/dqn-minatar-breakout.yaml (MinAtar's examples/dqn.py: a replay
// of 100,000 10×10×4 observations, learning from step 5,000) cut to
// 10,000 steps, checkpoint_every 2,500: 4 checkpoints a default run, the
// last at the end with 10,000 transitions in the replay; each also holds
// the game's state and its MT19937 stream.
func BenchmarkCheckpointMinAtar(b *testing.B) {
	steps := int64(10_000)
	benchCheckpoint(b, "../../configs/dqn-minatar-breakout.yaml", "checkpoint_every: 2500\n", algo.Overrides{Steps: &steps})
}

// benchCheckpoint runs BenchmarkCheckpoint's op on the config at path,
// with the header keys every (YAML) in the default runs and ov applied.
func benchCheckpoint(b *testing.B, path, every string, ov algo.Overrides) {
	cfg, err := os.ReadFile(path)
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
	run := func(kind string) {
		c := string(cfg) + every
		if kind == "end" {
			c = string(cfg) + "checkpoint_every: 1000000000000\n"
		}
		out := filepath.Join(b.TempDir(), "run")
		o := ov
		o.Out = &out
		res, err := algo.Resolve([]byte(c), []algo.Spec{Spec()}, o)
		if err != nil {
			b.Fatal(err)
		}
		c0, w0 := cpu(), time.Now()
		_, err = algo.TrainRun(context.Background(), res, algo.RunOptions{Checkpointed: func(c algo.CheckpointInfo) {
			if kind == "default" {
				n++
				bytes += int64(c.Bytes)
				took += c.Took
			}
		}})
		if err != nil {
			b.Fatal(err)
		}
		runs[kind] = append(runs[kind], (cpu() - c0).Seconds())
		walls[kind] = append(walls[kind], time.Since(w0).Seconds())
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
