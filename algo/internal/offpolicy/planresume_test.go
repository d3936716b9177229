package offpolicy_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"herd/algo"
	"herd/algo/dqn"
	"herd/algo/internal/learntest"
	"herd/algo/sac"
	"herd/algo/td3"
	"herd/flow"
	"herd/internal/trainstate"
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
	return learntest.TrainedBytes(t, ck, model, err)
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

// stepLog records every step a run logs and cancels it at step cut (0:
// never).
type stepLog struct {
	algo.Logger
	steps  []int64
	cut    int64
	cancel context.CancelFunc
}

func (l *stepLog) Step(s int64) {
	l.steps = append(l.steps, s)
	if l.cut > 0 && s >= l.cut {
		l.cancel()
	}
}

// apexState restores st's learner and replay into new ones built from res
// and returns the replay's size and the learner's update count.
func apexState(t *testing.T, res *algo.Resolved, st *trainstate.State) (stored int, updates uint64) {
	t.Helper()
	pc := learntest.Pieces(t, res)
	l, err := pc.NewTransitionLearner()
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	rb, err := pc.NewReplay()
	if err != nil {
		t.Fatal(err)
	}
	lc, err := pc.Checkpoint(l, rb)
	if err != nil {
		t.Fatal(err)
	}
	if err := lc.RestoreLearner(st); err != nil {
		t.Fatal(err)
	}
	return rb.Len(), l.Weights().N
}

// TestApeXPlanResume: the asynchronous Ape-X plan (two actors with their
// own ε, actor priorities, a prioritized replay, the store and replay
// sub-flows side by side) cut mid-run writes a checkpoint at a quiescent
// point — every env step stored in replay learned from, the actors'
// items in flight held — with the learner, the replay, each actor and the
// gather in it; resumed, it continues from that step to the budget: the
// steps it logs go on from the checkpoint's, and its last checkpoint
// holds every env step of the run in replay once (n_steps 1, a replay
// larger than the run) and the updates of the whole schedule, as the
// uninterrupted run's does. The actors act freely, so the run is not the
// uninterrupted run bit for bit.
func TestApeXPlanResume(t *testing.T) {
	const steps, learningStarts, trainFrequency = 1500, 200, 4
	cfg := fmt.Sprintf("algo: dqn\nenv: CartPole-v1\nseed: 3\nsteps: %d\nruntime: {executor: flow, env_workers: 2}\n"+
		"dqn: {buffer_size: 2000, learning_starts: %d, train_frequency: %d, batch_size: 32, net_arch: [16], prioritized: true, "+
		"initial_priorities: actor, apex_epsilon: 0.4}\n", steps, learningStarts, trainFrequency)
	res, err := algo.Resolve([]byte(cfg), []algo.Spec{dqn.Spec()}, algo.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	key, err := algo.ResumeConfig(res)
	if err != nil {
		t.Fatal(err)
	}
	// updates is the schedule's update count up to env step s.
	updates := func(s int64) uint64 { return uint64(max(0, s/trainFrequency-learningStarts/trainFrequency)) }
	dir := t.TempDir()
	train := func(cut int64, resume bool) (*stepLog, *trainstate.State, error) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		ck := algo.NewCheckpoints(algo.CheckpointOptions{Dir: dir, Every: 300, Keep: 2, Algo: "dqn", Env: res.Header.Env, Config: key})
		var from *trainstate.State
		if resume {
			st, _, _, err := algo.LoadCheckpoint(dir, "dqn", res.Header.Env, key)
			if err != nil {
				t.Fatal(err)
			}
			if err := ck.Resume(st); err != nil {
				t.Fatal(err)
			}
			from = st
		}
		log := &stepLog{Logger: algo.Discard(), cut: cut, cancel: cancel}
		rt := &algo.Runtime{Header: res.Header, Log: log, Checkpoints: ck}
		_, err := flow.Train(ctx, rt, res.Spec, res.Config)
		if ck.Disabled() != "" {
			t.Fatalf("checkpoints off: %s", ck.Disabled())
		}
		return log, from, err
	}
	if _, _, err := train(700, false); !errors.Is(err, context.Canceled) {
		t.Fatalf("cut at 700: %v, want context.Canceled", err)
	}
	log, cut, err := train(0, true)
	if err != nil {
		t.Fatal(err)
	}
	at := cut.Header.Step
	if at < 700 || at >= steps {
		t.Fatalf("the cut's checkpoint is at step %d, want one at or past 700", at)
	}
	t.Logf("resumed from step %d; the resumed run logged %d reports", at, len(log.steps))
	for _, sec := range []string{"learner", "replay", "flow/worker/0/0", "flow/worker/0/1", "flow/gather/0", "flow/run", "flow/run/ledger"} {
		if b, err := cut.Section(sec); err != nil || len(b) == 0 {
			t.Errorf("the cut's checkpoint lacks section %s: %v", sec, err)
		}
	}
	if n, u := apexState(t, res, cut); int64(n) != at || u != updates(at) {
		t.Errorf("checkpoint of step %d: %d transitions in replay and %d updates, want %d and %d", at, n, u, at, updates(at))
	}
	if len(log.steps) == 0 || log.steps[0] < at || log.steps[len(log.steps)-1] != steps || !slices.IsSorted(log.steps) {
		t.Fatalf("the resumed run logged steps %v, want them rising from %d to %d", log.steps, at, steps)
	}
	last, _, _, err := algo.LoadCheckpoint(dir, "dqn", res.Header.Env, key)
	if err != nil {
		t.Fatal(err)
	}
	if n, u := apexState(t, res, last); last.Header.Step != steps || n != steps || u != updates(steps) {
		t.Errorf("the last checkpoint, of step %d: %d transitions in replay and %d updates, want step %d, %d and %d",
			last.Header.Step, n, u, steps, steps, updates(steps))
	}
}
