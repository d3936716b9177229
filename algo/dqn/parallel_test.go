package dqn

import (
	"testing"

	"herd/algo/internal/learntest"
)

// TestParallelSameResults: the target forward and the weight gradients
// on a second goroutine change nothing in the results (Double DQN, so the
// online network runs twice beside the target's pass).
func TestParallelSameResults(t *testing.T) {
	learntest.ParallelSame(t, Spec(), "algo: dqn\nenv: CartPole-v1\nsteps: 1500\nlog_every: 100\n",
		"learning_starts=500", "train_frequency=1", "double_q=true")
}
