package a3c

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"herd/algo"
	"herd/algo/internal/learntest"
	"herd/flow"
)

// TestSmoke trains a short run on 4 workers (the flow executor runs the
// plan) with the least lag bound and with a wider one, and checks what
// can go wrong: the run reports every step of its budget, the driver
// applied one gradient per segment, every loss is finite, the weights
// moved away from their initial values, and no gradient was applied more
// than max_policy_lag updates after the weights it was computed at —
// exactly that many at the least bound, where gradients are applied in
// the order their segments were asked for (4 workers − 1 = 3).
func TestSmoke(t *testing.T) {
	for _, c := range []struct{ maxLag, want int }{{0, 3}, {9, 9}} {
		file := fmt.Sprintf("algo: a3c\nenv: CartPole-v1\nsteps: 2048\nruntime: {executor: flow, env_workers: 4}\n"+
			"a3c: {num_envs: 4, num_steps: 8, max_policy_lag: %d}\n", c.maxLag)
		res, err := algo.Resolve([]byte(file), []algo.Spec{Spec()}, algo.Overrides{})
		if err != nil {
			t.Fatal(err)
		}
		log := learntest.NewStatsLog()
		m, err := flow.WithTrain(Spec()).Train(context.Background(), &algo.Runtime{Header: res.Header, Log: log}, res.Config)
		if err != nil || m == nil {
			t.Fatal(m, err)
		}
		if log.LastStep != 2048 {
			t.Errorf("reported %d steps, want 2048", log.LastStep)
		}
		if n := log.Calls["losses/value_loss"]; n != 2048/8 {
			t.Errorf("%d gradients applied, want one per segment of 8 steps: %d", n, 2048/8)
		}
		if log.NonFinite != "" {
			t.Errorf("%s logged a non-finite value", log.NonFinite)
		}
		lagMax := log.Stats["charts/policy_lag_max"]
		if c.maxLag == 0 && lagMax != float64(c.want) || lagMax > float64(c.want) || lagMax < 1 {
			t.Errorf("max_policy_lag %d: largest lag %v, want %s %d", c.maxLag, lagMax, map[bool]string{true: "=", false: "1 …"}[c.maxLag == 0], c.want)
		}
		if bytes.Equal(learntest.ModelBytes(t, m), learntest.ModelBytes(t, learntest.InitialModel(t, res))) {
			t.Error("the weights did not change")
		}
	}
}

// TestLearnsProbes trains A3C on the probe envs (herd/env/probe) from
// three seeds and checks that it learns them (learntest.Probe): the
// one-step bandit tests the policy gradient; the corridor, paid only at
// its end five steps from the start, with segments of one step (every
// return is r + γ·V(x')) tests that the value bootstrap carries the
// credit back, and with segments of two steps the n-step returns.
func TestLearnsProbes(t *testing.T) {
	learntest.ProbeSegments(t, flow.WithTrain(Spec()), "algo: a3c\nenv: %s\nsteps: 6000\nruntime: {executor: flow, env_workers: 2}\n"+
		"a3c: {num_envs: 4, num_steps: %d, learning_rate: 0.01, gamma: 0.9, ent_coef: 0.01, hidden: [16]}\n", 2)
}
