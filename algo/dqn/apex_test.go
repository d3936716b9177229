package dqn

import (
	"math"
	"testing"

	"herd/algo"
	"herd/algo/internal/learntest"
	"herd/algo/internal/offpolicy"
	"herd/internal/rng"
	"herd/sample"
)

// TestActorPriorities: an env worker's |δ| with its own network matches the
// n-step TD error computed row by row, a terminal row does not bootstrap,
// bad rows are errors, and the option needs prioritized replay.
func TestActorPriorities(t *testing.T) {
	a, err := newAgent(3, 2, []int{8}, rng.New(1, "test", 0))
	if err != nil {
		t.Fatal(err)
	}
	p := &apexPolicy{MLPPolicy: &offpolicy.MLPPolicy{Net: a.Q}}
	r := rng.New(2, "test", 1)
	const n = 5
	tr := sample.NewTransitions(n, 3, 1)
	for i := range n * 3 {
		tr.Obs[i], tr.NextObs[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
	}
	for i := range n {
		tr.Actions[i] = float32(i % 2)
		tr.Rewards[i] = float32(i) - 1.5
		tr.Discounts[i] = float32(math.Pow(0.99, float64(1+i%3)))
	}
	tr.Dones[3] = 1
	if err := p.Prioritize(tr); err != nil {
		t.Fatal(err)
	}
	if len(tr.Priorities) != n {
		t.Fatalf("%d priorities for %d rows", len(tr.Priorities), n)
	}
	for i := range n {
		q := append([]float32(nil), a.Q.Forward(tr.Obs[i*3:i*3+3], 1)...)
		qn := a.Q.Forward(tr.NextObs[i*3:i*3+3], 1)
		boot := float32(math.Max(float64(qn[0]), float64(qn[1])))
		if tr.Dones[i] != 0 {
			boot = 0
		}
		want := float32(math.Abs(float64(tr.Rewards[i] + tr.Discounts[i]*boot - q[int(tr.Actions[i])])))
		if d := math.Abs(float64(tr.Priorities[i] - want)); d > 1e-5*(1+float64(want)) {
			t.Errorf("row %d: priority %v, want %v", i, tr.Priorities[i], want)
		}
	}
	tr.Actions[2] = 7
	if err := p.Prioritize(tr); err == nil {
		t.Error("action 7 of 2 accepted")
	}
	c := NewConfig()
	c.ActorPriorities = true
	learntest.ConfigError(t, c.Validate(algo.Header{Env: "CartPole-v1"}), "actor_priorities")
	c.Prioritized = true
	if err := c.Validate(algo.Header{Env: "CartPole-v1"}); err != nil {
		t.Errorf("actor_priorities with prioritized rejected: %v", err)
	}
}
