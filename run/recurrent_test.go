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

// TestRecurrentRefused: a recurrent PPO or IMPALA config trains under the
// local executor, hts (whose policy workers keep each env's state), dist
// (whose env workers carry it) and flow (whose rollout workers keep their
// envs' states, handed to the learner with the segments by IMPALA's own
// plan and by SyncPlan), and every executor that acts away from a per-env
// state refuses them through the capability table, saying why.
func TestRecurrentRefused(t *testing.T) {
	for _, c := range []struct {
		cfg     string
		carries []string
	}{
		{"algo: ppo\nenv: CartPoleNoVel-v1\nsteps: 4096\nppo: {num_envs: 4, num_minibatches: 2, recurrent: {type: lstm}}\nruntime: {executor: %s}\n",
			[]string{algo.LocalExecutor, "hts", "dist", "flow"}},
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

// TestRecurrentTrains runs a recurrent IMPALA config for a few
// updates under every executor that admits it, the flow plan's workers
// in-process and served over NATS, and a recurrent PPO config under flow
// (SyncPlan, its rounds gathered behind a barrier and one ahead): each
// run learns its whole budget.
func TestRecurrentTrains(t *testing.T) {
	const (
		impalaCfg = "algo: impala\nenv: CartPoleNoVel-v1\nseed: 2\nsteps: 512\nimpala: {num_envs: 4, num_steps: 8, hidden: [8], recurrent: {type: lstm, hidden: 8}}\nruntime: %s\n"
		ppoCfg    = "algo: ppo\nenv: CartPoleNoVel-v1\nseed: 2\nsteps: 512\nppo: {num_envs: 4, num_steps: 8, num_minibatches: 2, update_epochs: 2, hidden: [8], recurrent: {type: gru, hidden: 8}}\nruntime: %s\n"
	)
	for _, c := range []struct{ cfg, rt string }{
		{impalaCfg, "{executor: local}"}, {impalaCfg, "{executor: flow, env_workers: 2}"}, {impalaCfg, "{executor: flow, env_workers: 2, transport: nats}"},
		{impalaCfg, "{executor: hts, env_workers: 2, policy_workers: 2}"}, {impalaCfg, "{executor: dist, env_workers: 2, policy_workers: 2}"},
		{impalaCfg, "{executor: dist, env_workers: 2, inference: inline}"},
		{ppoCfg, "{executor: flow, env_workers: 2, transport: nats}"}, {ppoCfg, "{executor: flow, env_workers: 2, num_async: 2}"},
	} {
		t.Run(strings.Fields(c.cfg)[1]+" "+c.rt, func(t *testing.T) {
			res, err := algo.Resolve([]byte(strings.Replace(c.cfg, "%s", c.rt, 1)), all.Specs(), algo.Overrides{})
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
