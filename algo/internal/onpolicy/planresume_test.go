package onpolicy_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"herd/algo"
	"herd/algo/a2c"
	"herd/algo/a3c"
	"herd/algo/impala"
	"herd/algo/internal/learntest"
	"herd/algo/ppo"
	"herd/flow"
)

// TestPlanResumeBitIdentical: plans whose order does not depend on timing
// — IMPALA and A3C at the least lag bound (segments learned in the order
// they were asked for, with num_async segments in flight per worker),
// SyncPlan for PPO and A2C, A2C's with a round collected ahead
// (runtime.num_async 2) — cut early, mid-run and just after a periodic
// checkpoint, then resumed from the cut's checkpoint and, as if killed,
// from the one before, end with the uninterrupted run's model bytes. It
// fails if any part of the state is left out: the learner's parameters,
// optimizer or counters (IMPALA's learned steps, which anneal its
// learning rate), a worker's envs, sampler streams, observations or
// weights version, the segments or gradients requested and not yet
// learned, or the gathers' order of them; with a recurrent core
// (impala-lstm, ppo-lstm-sync-ahead), each env's state in its worker's
// policy and in the segments collected ahead.
func TestPlanResumeBitIdentical(t *testing.T) {
	cases := []struct {
		spec    algo.Spec
		name    string
		runtime string
		section string
		cuts    []int64
	}{
		{impala.Spec(), "impala", "{env_workers: 2}", "{num_envs: 4, num_steps: 16}", []int64{64, 704, 320}},
		{impala.Spec(), "impala-lstm", "{env_workers: 2}", "{num_envs: 4, num_steps: 16, hidden: [8], recurrent: {type: lstm, hidden: 8}}", []int64{64, 704, 320}},
		{a3c.Spec(), "a3c", "{env_workers: 2}", "{num_envs: 4, num_steps: 8}", []int64{32, 704, 304}},
		{ppo.Spec(), "ppo-sync", "{executor: flow, env_workers: 2}", "{num_envs: 2, num_steps: 64, update_epochs: 2}", []int64{128, 768, 384}},
		{ppo.Spec(), "ppo-lstm-sync-ahead", "{executor: flow, env_workers: 2, num_async: 2}", "{num_envs: 4, num_steps: 16, num_minibatches: 2, update_epochs: 2, hidden: [8], recurrent: {type: lstm, hidden: 8}}", []int64{64, 704, 320}},
		{a2c.Spec(), "a2c-sync-ahead", "{executor: flow, env_workers: 2, num_async: 2}", "{num_envs: 4, num_steps: 8}", []int64{32, 704, 320}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := fmt.Sprintf("algo: %s\nenv: CartPole-v1\nseed: 3\nsteps: 1536\nruntime: %s\n%s: %s\n", c.spec.Name, c.runtime, c.spec.Name, c.section)
			res, err := algo.Resolve([]byte(cfg), []algo.Spec{c.spec}, algo.Overrides{})
			if err != nil {
				t.Fatal(err)
			}
			learntest.ResumeCuts(t, res, 300, c.cuts, func(ck *algo.Checkpoints, cut int64) ([]byte, error) {
				return train(t, res, ck, cut)
			})
		})
	}
}

// stepLog records the last step reported and cancels at `at`.
type stepLog struct {
	algo.Logger
	at, last *int64
	cancel   context.CancelFunc
}

func (l stepLog) Step(step int64) {
	*l.last = step
	if step >= *l.at {
		l.cancel()
	}
}

// TestPlanWithoutCheckpointsStops: a plan whose state is not saved (a plan
// of the caller's, flow.TrainPlan) turns its checkpoints off and, cancelled,
// stops where it is, as a run without checkpoints, instead of running on
// to a checkpoint it will not take.
func TestPlanWithoutCheckpointsStops(t *testing.T) {
	cfg := "algo: impala\nenv: CartPole-v1\nseed: 3\nsteps: 200000\nimpala: {num_envs: 4, num_steps: 16}\n"
	res, err := algo.Resolve([]byte(cfg), []algo.Spec{impala.Spec()}, algo.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	key, _ := algo.ResumeConfig(res)
	ck := algo.NewCheckpoints(algo.CheckpointOptions{Dir: t.TempDir(), Every: 300, Algo: "impala", Env: res.Header.Env, Config: key})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	at, last := int64(640), int64(0)
	rt := &algo.Runtime{Header: res.Header, Log: stepLog{Logger: algo.Discard(), at: &at, last: &last, cancel: cancel}, Checkpoints: ck}
	_, err = flow.TrainPlan(ctx, rt, res.Spec, res.Config, flow.PlanFunc(func(r *flow.Run) (flow.Iter[flow.Report], error) {
		return flow.AsyncPlan(r, res.Config.(algo.AsyncPlanner))
	}))
	if !errors.Is(err, context.Canceled) || ck.Disabled() == "" || last >= 100000 {
		t.Fatalf("err %v, checkpoints off: %q, stopped at step %d", err, ck.Disabled(), last)
	}
}
