package impala

import (
	"testing"

	"herd/algo/internal/learntest"
	"herd/flow"
)

// BenchmarkCheckpoint measures the checkpoints of a default impala CartPole
// run of 51,200 steps under the local executor (learntest.BenchCheckpoint):
// besides the learner's state and the workers' envs and streams, each
// holds the segments or gradients requested and not yet learned.
func BenchmarkCheckpoint(b *testing.B) {
	learntest.BenchCheckpoint(b, flow.WithTrain(Spec()), "algo: impala\nenv: CartPole-v1\nsteps: 51200\n", "512")
}
