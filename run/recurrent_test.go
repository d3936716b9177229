package run_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"herd/algo"
	"herd/algo/all"
	"herd/run"
)

// TestRecurrentRefused: a recurrent PPO config trains under the local
// executor, hts (whose policy workers keep each env's state) and dist
// (whose env workers carry it), a recurrent IMPALA config under those
// and flow (its own plan's rollout workers keep their envs' states), and
// every executor that acts away from a per-env state refuses them
// through the capability table, saying why.
func TestRecurrentRefused(t *testing.T) {
	for _, c := range []struct {
		cfg     string
		carries []string
	}{
		{"algo: ppo\nenv: CartPoleNoVel-v1\nsteps: 4096\nppo: {num_envs: 4, num_minibatches: 2, recurrent: {type: lstm}}\nruntime: {executor: %s}\n",
			[]string{algo.LocalExecutor, "hts", "dist"}},
		{"algo: impala\nenv: CartPoleNoVel-v1\nsteps: 4096\nimpala: {num_envs: 4, recurrent: {type: lstm}}\nruntime: {executor: %s}\n",
			[]string{algo.LocalExecutor, "hts", "dist", "flow"}},
	} {
		for _, ex := range run.Executors() {
			res, err := algo.Resolve([]byte(strings.Replace(c.cfg, "%s", ex.Name, 1)), all.Specs(), algo.Overrides{})
			if err != nil {
				t.Fatal(err)
			}
			_, err = algo.AdmitRun(run.Executors(), res)
			plain := *res
			plain.Config = res.Spec.NewConfig()
			_, plainErr := algo.AdmitRun(run.Executors(), &plain)
			carries := slices.Contains(c.carries, ex.Name)
			switch {
			case carries && err != nil:
				t.Errorf("%s %s: %v", res.Spec.Name, ex.Name, err)
			case carries:
			case plainErr != nil:
				if !errors.Is(err, algo.ErrConfig) { // refused for other reasons too (pal: no transition learner)
					t.Errorf("%s %s: got %v, want a refusal", res.Spec.Name, ex.Name, err)
				}
			case (!errors.Is(err, algo.ErrConfig) || !strings.Contains(err.Error(), "stateless policy") || !strings.Contains(err.Error(), "recurrent.lstm")):
				t.Errorf("%s %s: got %v, want a refusal naming the stateless policy and recurrent.lstm", res.Spec.Name, ex.Name, err)
			}
		}
	}
}

// TestRecurrentIMPALATrains runs a recurrent IMPALA config for a few
// updates under every executor that admits it, the flow plan's workers
// in-process and served over NATS: each run learns its whole budget with
// finite losses.
func TestRecurrentIMPALATrains(t *testing.T) {
	const cfg = "algo: impala\nenv: CartPoleNoVel-v1\nseed: 2\nsteps: 512\nimpala: {num_envs: 4, num_steps: 8, hidden: [8], recurrent: {type: lstm, hidden: 8}}\nruntime: %s\n"
	for _, rt := range []string{"{executor: local}", "{executor: flow, env_workers: 2}", "{executor: flow, env_workers: 2, transport: nats}",
		"{executor: hts, env_workers: 2, policy_workers: 2}", "{executor: dist, env_workers: 2, policy_workers: 2}", "{executor: dist, env_workers: 2, inference: inline}"} {
		t.Run(rt, func(t *testing.T) {
			res, err := algo.Resolve([]byte(strings.Replace(cfg, "%s", rt, 1)), all.Specs(), algo.Overrides{})
			if err != nil {
				t.Fatal(err)
			}
			res.Header.Out = filepath.Join(t.TempDir(), "run")
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			sum, err := algo.TrainRun(ctx, res, algo.RunOptions{NoFiles: true, Executors: run.Executors()})
			if err != nil {
				t.Fatal(err)
			}
			if sum.Steps != res.Header.Steps || sum.Episodes == 0 {
				t.Errorf("%d steps (want %d), %d episodes", sum.Steps, res.Header.Steps, sum.Episodes)
			}
		})
	}
}

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
