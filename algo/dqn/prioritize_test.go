package dqn

import (
	"errors"
	"math"
	"strings"
	"testing"

	"herd/algo"
	"herd/env"
	"herd/sample"
)

func testPieces(t *testing.T, cfg *Config) *algo.Pieces {
	t.Helper()
	e, err := env.Make("CartPole-v1")
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ps, err := Pieces(algo.Header{Algo: "dqn", Env: "CartPole-v1", Seed: 3, Steps: 1000}, cfg,
		algo.Spaces{Obs: e.ObservationSpace(), Act: e.ActionSpace()})
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

// TestPrioritizeMatchesDirect: the actor's priorities are |δ| + ε with δ
// computed here row by row from the same policy's Q-values, for n-step
// discounts, a terminated row (no bootstrap) and a time-limit cut (γ^m,
// m < n, still bootstrapping).
func TestPrioritizeMatchesDirect(t *testing.T) {
	cfg := NewConfig()
	cfg.Prioritized, cfg.NSteps, cfg.InitialPriorities, cfg.PriorityEps = true, 3, PrioritiesActor, 1e-3
	ps := testPieces(t, cfg)
	if ps.NewPrioritizer == nil {
		t.Fatal("initial_priorities: actor gave no prioritizer")
	}
	z, err := ps.NewPrioritizer()
	if err != nil {
		t.Fatal(err)
	}
	pol, err := ps.NewPolicy()
	if err != nil {
		t.Fatal(err)
	}
	const n, d = 4, 4
	tr := sample.NewTransitions(n, d, 1)
	for i := range n * d {
		tr.Obs[i] = float32(math.Sin(float64(i)))
		tr.NextObs[i] = float32(math.Cos(float64(3 * i)))
	}
	g := float32(0.99)
	copy(tr.Actions, []float32{0, 1, 1, 0})
	copy(tr.Rewards, []float32{3, 1, 2, -1})
	copy(tr.Discounts, []float32{g * g * g, g * g * g, g, g * g})
	copy(tr.Dones, []float32{0, 1, 0, 0})
	if err := z.Prioritize(tr, pol); err != nil {
		t.Fatal(err)
	}
	if len(tr.Priorities) != n {
		t.Fatalf("%d priorities for %d transitions", len(tr.Priorities), n)
	}
	q, qn := make([]float32, 2), make([]float32, 2)
	for i := range n {
		pol.ForwardTo(q, tr.Obs[i*d:(i+1)*d], 1)
		pol.ForwardTo(qn, tr.NextObs[i*d:(i+1)*d], 1)
		y := float64(tr.Rewards[i]) + float64(tr.Discounts[i])*float64(1-tr.Dones[i])*float64(max(qn[0], qn[1]))
		want := math.Abs(y-float64(q[int(tr.Actions[i])])) + cfg.PriorityEps
		if got := float64(tr.Priorities[i]); math.Abs(got-want) > 1e-5*max(1, want) {
			t.Errorf("row %d: priority %v, want %v", i, got, want)
		}
	}
	// The terminated row's target is its reward alone.
	pol.ForwardTo(q, tr.Obs[d:2*d], 1)
	if want := math.Abs(1-float64(q[1])) + cfg.PriorityEps; math.Abs(float64(tr.Priorities[1])-want) > 1e-5 {
		t.Errorf("terminated row: priority %v, want |r − Q(s, a)| + ε = %v", tr.Priorities[1], want)
	}

	tr.Actions[2] = 5
	if err := z.Prioritize(tr, pol); err == nil || !strings.Contains(err.Error(), "action 5") || len(tr.Priorities) != 0 {
		t.Errorf("out-of-range action: err %v, %d priorities", err, len(tr.Priorities))
	}
	tr.Rewards = tr.Rewards[:2]
	if err := z.Prioritize(tr, pol); !errors.Is(err, sample.ErrShape) {
		t.Errorf("short rewards: err %v, want sample.ErrShape", err)
	}
}

// TestInitialPrioritiesConfig: the switch is off by default, and a bad
// value or actor priorities without prioritized replay are refused.
func TestInitialPrioritiesConfig(t *testing.T) {
	if ps := testPieces(t, NewConfig()); ps.NewPrioritizer != nil {
		t.Error("default config has a prioritizer")
	}
	h := algo.Header{Algo: "dqn", Env: "CartPole-v1", Seed: 1, Steps: 1000}
	for _, c := range []struct {
		prioritized bool
		value, want string
	}{
		{false, PrioritiesActor, "needs prioritized: true"},
		{true, "biggest", "initial_priorities must be"},
		{false, "", "initial_priorities must be"},
	} {
		cfg := NewConfig()
		cfg.Prioritized, cfg.InitialPriorities = c.prioritized, c.value
		if err := cfg.Validate(h); err == nil || !errors.Is(err, algo.ErrConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("prioritized %v, initial_priorities %q: err %v, want %q", c.prioritized, c.value, err, c.want)
		}
	}
	cfg := NewConfig()
	cfg.Prioritized, cfg.InitialPriorities = true, PrioritiesActor
	if err := cfg.Validate(h); err != nil {
		t.Errorf("valid config: %v", err)
	}
}
