package flow_test

import (
	"fmt"
	"testing"

	"herd/algo"
	"herd/algo/algotest"
	"herd/algo/dqn"
	"herd/algo/impala"
	"herd/algo/ppo"
	"herd/flow"
)

// TestResumeRestartsEnvs: every plan of the flow executor on LunarLander,
// whose Box2D world cannot be saved, checkpoints all else (the workers'
// sampler streams, weights and item counts, the gathers' held items, the
// learner, the replay); resumed twice, it completes with every metrics.csv
// step once and counts the envs each resume restarted: SyncPlan (PPO),
// AsyncPlan (IMPALA, segments held by the gather), ReplayPlan (DQN with
// 3-step returns, so the slots' assemblers have steps pending at each
// checkpoint) and ApeXPlan (two actors of one env each).
func TestResumeRestartsEnvs(t *testing.T) {
	cases := []struct {
		name, algo, section string
		spec                algo.Spec
		steps, logEvery     int64
		cuts                [2]int64
	}{
		{"syncplan", "ppo", "{num_envs: 2, num_steps: 64, update_epochs: 1}", ppo.Spec(), 1536, 128, [2]int64{300, 900}},
		{"asyncplan", "impala", "{num_envs: 2, num_steps: 32}", impala.Spec(), 1280, 128, [2]int64{300, 800}},
		{"replayplan", "dqn", "{num_envs: 2, buffer_size: 500, learning_starts: 200, batch_size: 32, train_frequency: 4, net_arch: [16, 16], n_steps: 3}",
			dqn.Spec(), 1200, 100, [2]int64{300, 800}},
		{"apexplan", "dqn", "{buffer_size: 500, learning_starts: 200, batch_size: 32, train_frequency: 4, net_arch: [16, 16], " +
			"prioritized: true, initial_priorities: actor}", dqn.Spec(), 1200, 100, [2]int64{300, 800}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			algotest.ResumeRestarts(t, func(out string) *algo.Resolved {
				return resolve(t, c.spec, fmt.Sprintf("algo: %s\nenv: LunarLander-v3\nseed: 5\nsteps: %d\nlog_every: %d\ncheckpoint_every: 300\nout: %s\n"+
					"runtime: {executor: flow, env_workers: 2}\n%s: %s\n", c.algo, c.steps, c.logEvery, out, c.algo, c.section))
			}, algo.RunOptions{Executors: []algo.Executor{flow.Executor()}}, 2, c.cuts)
		})
	}
}
