package onpolicy_test

import (
	"context"
	"fmt"
	"testing"

	"herd/algo"
	"herd/algo/a2c"
	"herd/algo/algotest"
	"herd/algo/internal/learntest"
	"herd/algo/ppo"
	"herd/env"
	"herd/flow"
)

// cutVector cancels the run's context once `at` env steps have been taken,
// wherever that falls in a segment: a Ctrl-C arriving mid-rollout.
type cutVector struct {
	*env.SyncVector
	at, steps int64
	cancel    context.CancelFunc
}

func (v *cutVector) Step(actions []float32) (*env.Batch, error) {
	v.steps += int64(v.NumEnvs())
	if v.steps >= v.at {
		v.cancel()
	}
	return v.SyncVector.Step(actions)
}

// resumeRun is one algorithm's short seeded CartPole run.
func resumeRun(t *testing.T, spec algo.Spec, envID, section string) *algo.Resolved {
	t.Helper()
	cfg := fmt.Sprintf("algo: %s\nenv: %s\nseed: 3\nsteps: 1536\n%s:\n%s", spec.Name, envID, spec.Name, section)
	res, err := algo.Resolve([]byte(cfg), []algo.Spec{spec}, algo.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// train runs res's Train (flow.Train under runtime.executor flow) with
// checkpoints ck (nil: none), cutting the run at env step cut (0: never):
// a plan's after the report that reaches it, the local loop's inside the
// segment (cutVector). It returns the model's bytes and Train's error.
func train(t *testing.T, res *algo.Resolved, ck *algo.Checkpoints, cut int64) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rt := &algo.Runtime{Header: res.Header, Log: algo.Discard(), Checkpoints: ck}
	trainFn := res.Spec.Train
	plan := res.Header.Runtime.Executor == "flow" || res.Spec.Can&algo.CanPlan != 0
	if plan {
		trainFn = func(ctx context.Context, rt *algo.Runtime, c algo.Config) (algo.Model, error) {
			return flow.Train(ctx, rt, res.Spec, c)
		}
	}
	switch {
	case cut > 0 && plan:
		rt.Log = learntest.CutAt(cut, cancel)
	case cut > 0:
		rt.Envs = func(n int) (env.Vector, error) {
			v, err := env.MakeVector(res.Header.Env, n, env.Sync, env.WithEpisodeStatistics())
			if err != nil {
				return nil, err
			}
			return &cutVector{SyncVector: v.(*env.SyncVector), at: cut, cancel: cancel}, nil
		}
	}
	model, err := trainFn(ctx, rt, res.Config)
	return learntest.TrainedBytes(t, ck, model, err)
}

// TestResumeBitIdentical: PPO and A2C on CartPole (and PPO on Pendulum,
// once), cut early (inside the
// first segment, before any periodic checkpoint), mid-segment (checkpoint
// every 300 steps, which no segment of 128 or 32 steps divides) and just
// after a periodic checkpoint, then resumed from the checkpoint the cut
// wrote, end with the same model bytes as the run that was never cut. Each
// cut is resumed a second time as if the process had been killed instead
// (its own checkpoint lost): from the periodic checkpoint before it, the
// steps after that are taken again, to the same bytes. It fails if any
// part of the state is left out of a checkpoint: the optimizer moments,
// a random stream (the sampler's, PPO's minibatch order), the envs, the
// loop's observations or counters.
func TestResumeBitIdentical(t *testing.T) {
	cases := []struct {
		spec         algo.Spec
		env, section string
		cuts         []int64 // early, mid-segment, just after a checkpoint
	}{
		{ppo.Spec(), "CartPole-v1", "  num_envs: 2\n  num_steps: 64\n  update_epochs: 2\n", []int64{50, 700, 385}},
		{a2c.Spec(), "CartPole-v1", "  num_envs: 4\n  num_steps: 8\n  use_rms_prop: true\n", []int64{20, 700, 321}},
		// Box actions: the Gaussian sampler's draws and ClipAction.
		{ppo.Spec(), "Pendulum-v1", "  num_envs: 2\n  num_steps: 64\n  update_epochs: 2\n", []int64{700}},
		// PPO-LSTM: each env's recurrent state, which the next step
		// starts from, is part of the loop's state.
		{ppo.Spec(), "CartPoleNoVel-v1", "  num_envs: 2\n  num_steps: 32\n  update_epochs: 2\n  num_minibatches: 2\n  hidden: [8]\n  recurrent: {type: lstm, hidden: 8}\n", []int64{50, 700, 321}},
	}
	for _, c := range cases {
		t.Run(c.spec.Name+"/"+c.env, func(t *testing.T) {
			res := resumeRun(t, c.spec, c.env, c.section)
			learntest.ResumeCuts(t, res, 300, c.cuts, func(ck *algo.Checkpoints, cut int64) ([]byte, error) {
				return train(t, res, ck, cut)
			})
		})
	}
}

// TestResumeRestartsEnvs: PPO on LunarLander, whose Box2D world cannot be
// saved, checkpoints all else; resumed twice, it completes with every
// metrics.csv step once and counts the envs it restarted.
func TestResumeRestartsEnvs(t *testing.T) {
	algotest.ResumeRestarts(t, func(out string) *algo.Resolved {
		cfg := fmt.Sprintf("algo: ppo\nenv: LunarLander-v3\nseed: 5\nsteps: 1536\nlog_every: 128\ncheckpoint_every: 300\nout: %s\n"+
			"ppo:\n  num_envs: 2\n  num_steps: 64\n  update_epochs: 1\n", out)
		res, err := algo.Resolve([]byte(cfg), []algo.Spec{ppo.Spec()}, algo.Overrides{})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}, algo.RunOptions{}, 2, [2]int64{300, 900})
}
