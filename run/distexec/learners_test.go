package distexec_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"herd/algo"
	"herd/algo/a2c"
	"herd/algo/dqn"
	"herd/algo/ppo"
	"herd/metrics"
	"herd/run"
	"herd/run/distexec"
)

const ppoLearners = `algo: ppo
env: CartPole-v1
seed: 2
steps: %d
log_every: 256
runtime: {executor: dist, env_workers: 2, learners: 2, transport: %s}
ppo: {num_envs: 4, num_steps: 32, num_minibatches: 2, update_epochs: 2}
`

// Two data-parallel learners run through algo.TrainRun on both transports:
// the run counts every learner's steps and episodes, and nothing is
// learned twice.
func TestTrainRunTwoLearners(t *testing.T) {
	const steps = 2 * 4 * 32 * 6
	for _, tr := range []string{"inproc", "nats"} {
		t.Run(tr, func(t *testing.T) {
			_, sum := trainFile(t, fmt.Sprintf(ppoLearners, steps, tr), 120*time.Second, ppo.Spec())
			if sum.Steps != steps || sum.Episodes == 0 {
				t.Errorf("summary: %d steps (want %d), %d episodes", sum.Steps, steps, sum.Episodes)
			}
			if d := sum.Dist["dist/duplicates"]; d != 0 {
				t.Errorf("%v duplicates", d)
			}
		})
	}
}

// runtime.learners is refused where the topology cannot share updates.
func TestLearnersRefused(t *testing.T) {
	for _, c := range []struct {
		spec algo.Spec
		yaml string
		want string
	}{
		{ppo.Spec(), "algo: ppo\nenv: CartPole-v1\nsteps: 4096\nruntime: {executor: dist, env_workers: 3, learners: 2}\n", "multiple of learners"},
		{ppo.Spec(), "algo: ppo\nenv: CartPole-v1\nsteps: 4096\nruntime: {executor: dist, env_workers: 3, learners: 3}\nppo: {num_envs: 1, num_steps: 4, num_minibatches: 2}\n", "must divide the minibatch"},
		{a2c.Spec(), "algo: a2c\nenv: CartPole-v1\nsteps: 4096\nruntime: {executor: dist, env_workers: 2, learners: 2}\n", "needs a segment learner, a data-parallel learner, a stateless policy (on-policy topology)"},
		{dqn.Spec(), "algo: dqn\nenv: CartPole-v1\nsteps: 4096\nruntime: {executor: dist, env_workers: 3, learners: 2}\n", "multiple of learners"},
		{dqn.Spec(), "algo: dqn\nenv: CartPole-v1\nsteps: 4096\nruntime: {executor: dist, env_workers: 2, learners: 2}\ndqn: {buffer_size: 10001}\n", "divide buffer_size"},
		{dqn.Spec(), "algo: dqn\nenv: CartPole-v1\nsteps: 4096\nruntime: {executor: dist, env_workers: 3, learners: 3}\ndqn: {buffer_size: 9999, batch_size: 128}\n", "divide batch_size"},
		{dqn.Spec(), "algo: dqn\nenv: CartPole-v1\nsteps: 4096\nruntime: {executor: dist, env_workers: 2, sync_batch: full}\n", "one learner"},
	} {
		res, err := algo.Resolve([]byte(c.yaml), []algo.Spec{c.spec}, algo.Overrides{})
		if err == nil {
			_, err = distexec.Prepare(res.Header, res.Spec, res.Config)
		}
		if !errors.Is(err, algo.ErrConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an ErrConfig saying %q", c.yaml, err, c.want)
		}
	}
}

const dqnLearners = `algo: dqn
env: CartPole-v1
seed: 2
steps: %d
log_every: 500
runtime: {executor: dist, env_workers: 2, learners: 2, transport: %s}
dqn: {num_envs: 1, batch_size: 32, buffer_size: 2000, learning_starts: 500, train_frequency: 10, target_network_frequency: 100, net_arch: [16]}
`

// Two off-policy learners run through algo.TrainRun on both transports:
// the run counts every learner's steps and episodes, and nothing is
// learned twice.
func TestTrainRunTwoOffLearners(t *testing.T) {
	const steps = 4000
	for _, tr := range []string{"inproc", "nats"} {
		t.Run(tr, func(t *testing.T) {
			_, sum := trainFile(t, fmt.Sprintf(dqnLearners, steps, tr), 120*time.Second, dqn.Spec())
			if sum.Steps != steps || sum.Episodes == 0 {
				t.Errorf("summary: %d steps (want %d), %d episodes", sum.Steps, steps, sum.Episodes)
			}
			if d := sum.Dist["dist/duplicates"]; d != 0 {
				t.Errorf("%v duplicates", d)
			}
		})
	}
}

// trainFile resolves the config file with specs, writes the run under a
// temporary directory and trains it through algo.TrainRun within timeout;
// any error fails t.
func trainFile(t *testing.T, file string, timeout time.Duration, specs ...algo.Spec) (*algo.Resolved, metrics.Summary) {
	t.Helper()
	res, err := algo.Resolve([]byte(file), specs, algo.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	res.Header.Out = t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	sum, err := algo.TrainRun(ctx, res, algo.RunOptions{Executors: run.Executors()})
	if err != nil {
		t.Fatal(err)
	}
	return res, sum
}
