package offpolicy_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"herd/algo"
	"herd/algo/dqn"
	"herd/algo/internal/learntest"
	"herd/algo/sac"
	"herd/algo/td3"
	"herd/flow"
)

// trainPlan runs res under the flow executor with checkpoints ck (nil:
// none), cut at env step cut (0: never), and returns the model's bytes
// and Train's error.
func trainPlan(t *testing.T, res *algo.Resolved, ck *algo.Checkpoints, cut int64) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rt := &algo.Runtime{Header: res.Header, Log: algo.Discard(), Checkpoints: ck}
	if cut > 0 {
		rt.Log = learntest.CutAt(cut, cancel)
	}
	model, err := flow.Train(ctx, rt, res.Spec, res.Config)
	if ck != nil && ck.Disabled() != "" {
		t.Fatalf("checkpoints off: %s", ck.Disabled())
	}
	if model == nil {
		t.Fatalf("no model: %v", err)
	}
	return learntest.ModelBytes(t, model), err
}

// TestReplayPlanResumeBitIdentical: the flow executor's ReplayPlan (DQN,
// SAC, TD3, DDPG with in-process workers: num_envs spread over two slot
// workers, GatherSync, a round-robin Union of the store and replay
// sub-flows) cut early (before learning starts), mid-run and just after a
// periodic checkpoint, then resumed from the cut's checkpoint and, as if
// killed, from the one before, ends with the uninterrupted run's model
// bytes. A cut seen after a store item waits for the updates due for it
// (the ledger's readiness). It fails if any part of the state is left
// out: the learner's networks, targets, optimizers, streams or counters
// (TD3's delayed actor step, with policy_frequency 3), the replay's
// contents, FIFO position or priorities, a slot's env, sampler stream, OU
// noise or n-step accumulator, the workers' observations, weights version
// or item count, or the ledger's counts.
func TestReplayPlanResumeBitIdentical(t *testing.T) {
	cases := []struct {
		name    string
		spec    algo.Spec
		env     string
		section string
		cuts    []int64
	}{
		{"dqn-prioritized", dqn.Spec(), "CartPole-v1", "{num_envs: 4, buffer_size: 500, learning_starts: 200, batch_size: 32, train_frequency: 4, " +
			"target_network_frequency: 100, net_arch: [16, 16], prioritized: true, n_steps: 3, exploration_fraction: 0.6}", []int64{100, 702, 604}},
		{"dqn-uniform", dqn.Spec(), "CartPole-v1", "{num_envs: 2, buffer_size: 500, learning_starts: 200, batch_size: 32, train_frequency: 4, " +
			"target_network_frequency: 100, net_arch: [16, 16]}", []int64{702}},
		{"td3-ou", td3.Spec(), "Pendulum-v1", "{num_envs: 2, buffer_size: 500, learning_starts: 200, batch_size: 32, net_arch: [16, 16], " +
			"noise_type: ou, policy_frequency: 3}", []int64{100, 701, 602}},
		{"sac", sac.Spec(), "Pendulum-v1", "{num_envs: 2, buffer_size: 500, learning_starts: 200, batch_size: 32, net_arch: [16, 16], " +
			"policy_frequency: 3, target_network_frequency: 2}", []int64{701}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cfg := fmt.Sprintf("algo: %s\nenv: %s\nseed: 3\nsteps: %d\nruntime: {executor: flow, env_workers: 2}\n%s: %s\n",
				c.spec.Name, c.env, resumeSteps, c.spec.Name, c.section)
			res, err := algo.Resolve([]byte(cfg), []algo.Spec{c.spec}, algo.Overrides{})
			if err != nil {
				t.Fatal(err)
			}
			learntest.ResumeCuts(t, res, 300, c.cuts, func(ck *algo.Checkpoints, cut int64) ([]byte, error) {
				return trainPlan(t, res, ck, cut)
			})
		})
	}
}

// TestApeXPlanNoCheckpoints: the asynchronous Ape-X plan saves no state;
// its run turns checkpoints off, says why, and writes none.
func TestApeXPlanNoCheckpoints(t *testing.T) {
	cfg := "algo: dqn\nenv: CartPole-v1\nseed: 3\nsteps: 400\nruntime: {executor: flow, env_workers: 2}\n" +
		"dqn: {buffer_size: 500, learning_starts: 200, batch_size: 32, net_arch: [16], prioritized: true, initial_priorities: actor}\n"
	res, err := algo.Resolve([]byte(cfg), []algo.Spec{dqn.Spec()}, algo.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	key, err := algo.ResumeConfig(res)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ck := algo.NewCheckpoints(algo.CheckpointOptions{Dir: dir, Every: 100, Algo: "dqn", Env: res.Header.Env, Config: key})
	rt := &algo.Runtime{Header: res.Header, Log: algo.Discard(), Checkpoints: ck}
	if _, err := flow.Train(context.Background(), rt, res.Spec, res.Config); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ck.Disabled(), "Ape-X") {
		t.Fatalf("checkpoints off: %q, want the Ape-X plan named", ck.Disabled())
	}
	if names, _ := os.ReadDir(dir); len(names) > 0 {
		t.Errorf("checkpoints written: %v", names)
	}
}
