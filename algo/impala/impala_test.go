package impala

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
// can go wrong: the run reports every step of its budget, the learner
// took one update per segment, every loss is finite, the weights moved
// away from their initial values, and no segment was learned more than
// max_policy_lag versions after its policy — exactly that many at the
// least bound, where segments are learned in the order they were asked
// for (4 workers × 2 in flight − 1 = 7).
func TestSmoke(t *testing.T) {
	for _, c := range []struct{ maxLag, want int }{{0, 7}, {12, 12}} {
		file := fmt.Sprintf("algo: impala\nenv: CartPole-v1\nsteps: 2048\nruntime: {executor: flow, env_workers: 4}\n"+
			"impala: {num_envs: 4, num_steps: 16, num_async: 2, max_policy_lag: %d}\n", c.maxLag)
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
		if n := log.Calls["losses/value_loss"]; n != 2048/16 {
			t.Errorf("%d updates, want one per segment of 16 steps: %d", n, 2048/16)
		}
		if log.NonFinite != "" {
			t.Errorf("%s logged a non-finite value", log.NonFinite)
		}
		if rho := log.Stats["losses/mean_rho"]; !(rho > 0 && rho <= 1) {
			t.Errorf("mean ρ %v, want in (0, 1]", rho)
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

// TestLearnsProbes trains IMPALA on the probe envs (herd/env/probe) from
// three seeds and checks that it learns them (learntest.Probe): the
// one-step bandit tests the policy gradient; the corridor, paid only at
// its end five steps from the start, with segments of one step tests that
// the V-trace targets bootstrap from V(x_T), and with segments of four
// steps the traces within a segment. Four segments in flight (2 workers ×
// 2) make the learner's policy lag the segments', so the importance
// weights differ from 1.
func TestLearnsProbes(t *testing.T) {
	learntest.ProbeSegments(t, flow.WithTrain(Spec()), "algo: impala\nenv: %s\nsteps: 6000\nruntime: {executor: flow, env_workers: 2}\n"+
		"impala: {num_envs: 4, num_steps: %d, num_async: 2, anneal_lr: false, learning_rate: 0.01, gamma: 0.9, ent_coef: 0.01, hidden: [16]}\n", 4)
}
