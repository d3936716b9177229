package learntest

import (
	"testing"

	"herd/algo"
	"herd/internal/ckptbench"
)

// BenchCheckpoint measures the checkpoints of the run of cfg (a config
// file without checkpoint_every) under the local executor, with a
// checkpoint every `every` env steps and with the default interval
// (ckptbench.Run).
func BenchCheckpoint(b *testing.B, spec algo.Spec, cfg string, every string) {
	ckptbench.Run(b, spec, cfg, every)
}
