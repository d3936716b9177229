package pal

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"herd/algo"
	"herd/algo/dqn"
)

// BenchmarkCheckpoint measures the checkpoints of
// configs/dqn-cartpole-pal.yaml (2 actors, one learner, a replay of 10,000
// transitions, full from step 10,000 on) cut to 50,000 steps with a
// checkpoint every 10,000, through algo.TrainRun: ckpt-ms is
// algo.CheckpointInfo.Took (adding the metrics, encoding, writing,
// fsyncing and renaming the file, pruning; not the actors' hold nor
// gathering the learner and the replay), ckpt-bytes the file's size, both
// per checkpoint (5 per run, the last at the end).
func BenchmarkCheckpoint(b *testing.B) {
	cfg, err := os.ReadFile("../../configs/dqn-cartpole-pal.yaml")
	if err != nil {
		b.Fatal(err)
	}
	var n int
	var bytes int64
	var took time.Duration
	for b.Loop() {
		out := filepath.Join(b.TempDir(), "run")
		res, err := algo.Resolve(append(cfg, "checkpoint_every: 10000\n"...), []algo.Spec{dqn.Spec()}, algo.Overrides{Out: &out})
		if err != nil {
			b.Fatal(err)
		}
		res.Header.Steps = 50_000
		_, err = algo.TrainRun(context.Background(), res, algo.RunOptions{Executors: []algo.Executor{Executor()},
			Checkpointed: func(c algo.CheckpointInfo) {
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
}
