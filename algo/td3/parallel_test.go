package td3

import (
	"testing"

	"herd/algo/internal/learntest"
)

// TestParallelSameResults: the work of the second goroutine (parallel:
// true) changes nothing in the results.
func TestParallelSameResults(t *testing.T) {
	learntest.ParallelSame(t, Spec(), "algo: td3\nenv: Pendulum-v1\nsteps: 800\nlog_every: 100\n",
		"learning_starts=300", "net_arch=[32,32]", "batch_size=64")
}
