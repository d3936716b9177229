package learntest

import (
	"testing"

	"herd/algo"
	"herd/algo/algotest"
)

// BenchCheckpoint measures the checkpoints of the run of cfg (a config
// file without checkpoint_every) under the local executor, with a
// checkpoint every `every` env steps and with the default interval
// (algotest.CheckpointBench).
func BenchCheckpoint(b *testing.B, spec algo.Spec, cfg string, every string) {
	algotest.CheckpointBench(b, spec, cfg, every)
}
