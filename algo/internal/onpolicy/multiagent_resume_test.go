package onpolicy_test

import (
	"context"
	"testing"

	"herd/algo"
	"herd/algo/dqn"
	"herd/algo/internal/learntest"
	"herd/algo/ppo"
	"herd/run/multipolicy"
)

// TestMultiAgentResumeBitIdentical: runs with several policies on MPE
// simple_tag (three adversaries and a good agent, two policies), cut
// before any periodic checkpoint, between two and just after one, then
// resumed from the checkpoint the cut wrote (and, as if killed, from the
// one before), end with the same model bytes as the run that was never
// cut. The checkpoints are taken at a joint step where every policy ends
// an iteration; they fail this test if any policy's learner, stream or
// loop state, the envs' physics and random streams, or the rows' episode
// accumulators are left out. Two PPO policies (num_steps 16), and PPO
// with DQN (RLlib Flow's twin trainer: the DQN policy's replay, ε and
// updates every joint step).
func TestMultiAgentResumeBitIdentical(t *testing.T) {
	const head = "env: mpe/simple_tag_v3?agent_id=true&max_cycles=20\nseed: 4\nsteps: 1536\n" +
		"multiagent:\n  policies: [adversary, good]\n  policy_mapping: {adversary_*: adversary, agent_0: good}\n"
	const ppoSection = "ppo:\n  num_envs: 8\n  num_steps: 16\n  update_epochs: 2\n  num_minibatches: 2\n  hidden: [16]\n"
	cases := []struct {
		name, cfg string
		cuts      []int64
	}{
		{"ppo", "algo: ppo\n" + head + ppoSection, []int64{40, 700, 520}},
		{"ppo+dqn", "algo: ppo\n" + head + "  algos: {good: dqn}\n" + ppoSection +
			"dqn:\n  num_envs: 8\n  learning_starts: 64\n  buffer_size: 500\n  batch_size: 16\n  train_frequency: 2\n  target_network_frequency: 64\n  net_arch: [16]\n",
			[]int64{40, 700, 520}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := algo.Resolve([]byte(c.cfg), []algo.Spec{ppo.Spec(), dqn.Spec()}, algo.Overrides{})
			if err != nil {
				t.Fatal(err)
			}
			learntest.ResumeCuts(t, res, 300, c.cuts, func(ck *algo.Checkpoints, cut int64) ([]byte, error) {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				rt := &algo.Runtime{Header: res.Header, Log: algo.Discard(), Others: res.Others, Checkpoints: ck}
				if cut > 0 {
					rt.Log = learntest.CutAt(cut, cancel)
				}
				model, err := multipolicy.Train(ctx, rt, res.Spec, res.Config)
				return learntest.TrainedBytes(t, ck, model, err)
			})
		})
	}
}
