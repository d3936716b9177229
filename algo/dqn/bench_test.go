package dqn

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"herd/algo"
)

// BenchmarkCheckpoint measures the checkpoints of configs/dqn-cartpole.yaml
// (CleanRL's dqn.py: 500,000 steps, a replay of 10,000 transitions, full
// from step 10,000 on) through TrainRun. One op is the whole run:
// every=default takes the checkpoints of checkpoint_every's default
// (100,000 steps: 5, the last at the end), every=end only the final one,
// so the two ops' times differ by 4 checkpoints; -count alternates them.
// ckpt-ms and ckpt-bytes are per checkpoint: the time to gather the state
// (Q-network, target, Adam, streams, the replay, the envs, the metrics
// recorder's state and files) and to write it (encode, fsync, rename, drop
// the oldest), and its size.
func BenchmarkCheckpoint(b *testing.B) {
	cfg, err := os.ReadFile("../../configs/dqn-cartpole.yaml")
	if err != nil {
		b.Fatal(err)
	}
	for _, every := range []string{"default", "end"} {
		b.Run("every="+every, func(b *testing.B) {
			c := string(cfg)
			if every == "end" {
				c += "checkpoint_every: 1000000000000\n"
			}
			var n int
			var bytes int64
			var took time.Duration
			for b.Loop() {
				out := filepath.Join(b.TempDir(), "run")
				res, err := algo.Resolve([]byte(c), []algo.Spec{Spec()}, algo.Overrides{Out: &out})
				if err != nil {
					b.Fatal(err)
				}
				_, err = algo.TrainRun(context.Background(), res, algo.RunOptions{Checkpointed: func(c algo.CheckpointInfo) {
					n++
					bytes += int64(c.Bytes)
					took += c.Took
				}})
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)/float64(b.N), "ckpts/op")
			b.ReportMetric(took.Seconds()*1000/float64(n), "ckpt-ms")
			b.ReportMetric(float64(bytes)/float64(n), "ckpt-bytes")
		})
	}
}
