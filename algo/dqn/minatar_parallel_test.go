package dqn

import (
	"testing"

	"herd/algo/internal/learntest"
)

// TestParallelSameResultsMinAtar: with MinAtar's network and centered
// RMSProp, the target network's forward pass on the second goroutine
// changes nothing in the results.
func TestParallelSameResultsMinAtar(t *testing.T) {
	learntest.ParallelSame(t, Spec(), "algo: dqn\nenv: MinAtar/Breakout-v1\nsteps: 600\nlog_every: 100\n",
		"encoder=minatar", "net_arch=[128]", "optimizer=rmsprop", "rmsprop_alpha=0.95", "rmsprop_eps=0.01",
		"rmsprop_centered=true", "loss=huber", "batch_size=32", "learning_starts=200", "train_frequency=1",
		"target_network_frequency=100")
}
