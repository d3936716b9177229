package algotest

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"herd/algo"
)

// CheckpointBench measures the checkpoints of the run of cfg (a config file without
// checkpoint_every) written through algo.TrainRun under exs (none: the
// local executor), with a checkpoint every `every` env steps and with the
// default interval (the final one only): the mean time of
// algo.CheckpointInfo.Took (ckpt-ms) and the mean file size (ckpt-bytes).
func CheckpointBench(b *testing.B, spec algo.Spec, cfg string, every string, exs ...algo.Executor) {
	for _, ev := range []string{every, "default"} {
		b.Run("every="+ev, func(b *testing.B) {
			c := cfg
			if ev != "default" {
				c += "checkpoint_every: " + ev + "\n"
			}
			var n int
			var bytes int64
			var took time.Duration
			for b.Loop() {
				out := filepath.Join(b.TempDir(), "run")
				res, err := algo.Resolve([]byte(c), []algo.Spec{spec}, algo.Overrides{Out: &out})
				if err != nil {
					b.Fatal(err)
				}
				_, err = algo.TrainRun(context.Background(), res, algo.RunOptions{Executors: exs, Checkpointed: func(c algo.CheckpointInfo) {
					n++
					bytes += int64(c.Bytes)
					took += c.Took
				}})
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(took.Seconds()*1000/float64(n), "ckpt-ms")
			b.ReportMetric(float64(bytes)/float64(n), "ckpt-bytes")
		})
	}
}
