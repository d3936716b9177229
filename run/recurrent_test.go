package run_test

import (
	"errors"
	"strings"
	"testing"

	"herd/algo"
	"herd/algo/all"
	"herd/run"
)

// TestRecurrentRefused: a recurrent PPO config trains under the local
// executor and under dist (whose env workers carry each env's state), and
// every executor that acts away from a per-env state refuses it through
// the capability table, saying why.
func TestRecurrentRefused(t *testing.T) {
	const cfg = "algo: ppo\nenv: CartPoleNoVel-v1\nsteps: 4096\nppo: {num_envs: 4, num_minibatches: 2, recurrent: {type: lstm}}\nruntime: {executor: %s}\n"
	for _, ex := range run.Executors() {
		res, err := algo.Resolve([]byte(strings.Replace(cfg, "%s", ex.Name, 1)), all.Specs(), algo.Overrides{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = algo.AdmitRun(run.Executors(), res)
		plain := *res
		plain.Config = res.Spec.NewConfig()
		_, plainErr := algo.AdmitRun(run.Executors(), &plain)
		switch {
		case carries(ex.Name) && err != nil:
			t.Errorf("%s: %v", ex.Name, err)
		case carries(ex.Name):
		case plainErr != nil:
			if !errors.Is(err, algo.ErrConfig) { // refused for other reasons too (pal: no transition learner)
				t.Errorf("%s: got %v, want a refusal", ex.Name, err)
			}
		case (!errors.Is(err, algo.ErrConfig) || !strings.Contains(err.Error(), "stateless policy") || !strings.Contains(err.Error(), "recurrent.lstm")):
			t.Errorf("%s: got %v, want a refusal naming the stateless policy and recurrent.lstm", ex.Name, err)
		}
	}
}

// carries names the executors that keep or carry a recurrent state per env.
func carries(executor string) bool { return executor == algo.LocalExecutor || executor == "dist" }

// TestRecurrentDistLearnersRefused: dist carries the state, but M > 1
// learners split minibatches that a recurrent learner takes as whole env
// sequences, so runtime.learners > 1 is refused, saying why.
func TestRecurrentDistLearnersRefused(t *testing.T) {
	const cfg = "algo: ppo\nenv: CartPoleNoVel-v1\nsteps: 4096\nppo: {num_envs: 4, num_minibatches: 2, recurrent: {type: lstm}}\nruntime: {executor: dist, env_workers: 2, learners: 2}\n"
	res, err := algo.Resolve([]byte(cfg), all.Specs(), algo.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = algo.AdmitRun(run.Executors(), res)
	if !errors.Is(err, algo.ErrConfig) || !strings.Contains(err.Error(), "data-parallel") || !strings.Contains(err.Error(), "recurrent.lstm") {
		t.Errorf("got %v, want a refusal naming the data-parallel learner and recurrent.lstm", err)
	}
}
