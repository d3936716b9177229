package pal

import (
	"os"
	"strings"
	"testing"

	"herd/algo/algotest"
	"herd/algo/dqn"
)

// BenchmarkCheckpoint measures the checkpoints of
// configs/dqn-cartpole-pal.yaml (2 actors, one learner, a replay of 10,000
// transitions, full from step 10,000 on) cut to 50,000 steps, through
// algo.TrainRun: every=10000 writes 5 (the last at the end), every=default
// the final one only. ckpt-ms is algo.CheckpointInfo.Took (adding the
// metrics, encoding, writing, fsyncing and renaming the file, pruning; not
// the actors' hold nor gathering the learner and the replay), ckpt-bytes
// the file's size, both per checkpoint.
func BenchmarkCheckpoint(b *testing.B) {
	cfg, err := os.ReadFile("../../configs/dqn-cartpole-pal.yaml")
	if err != nil {
		b.Fatal(err)
	}
	algotest.CheckpointBench(b, dqn.Spec(), strings.Replace(string(cfg), "steps: 500000", "steps: 50000", 1), "10000", Executor())
}
