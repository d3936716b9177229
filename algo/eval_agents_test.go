package algo

import (
	"context"
	"errors"
	"math"
	"testing"
)

// constPolicy always takes action a.
type constPolicy struct{ a float32 }

func (p constPolicy) Act(dst, _ []float32) []float32 { dst[0] = p.a; return dst }

// TestEvaluateAgentsMatchesEvaluate checks that the per-agent returns of a
// multi-agent evaluation add up to the team return, which is Evaluate's
// return for the same seeds (the turn-based view sums the agents' rewards).
func TestEvaluateAgentsMatchesEvaluate(t *testing.T) {
	const id = "mpe/simple_spread_v3"
	ctx := context.Background()
	res, err := EvaluateAgents(ctx, constPolicy{2}, id, 3, 9)
	if err != nil {
		t.Fatal(err)
	}
	team, err := Evaluate(ctx, constPolicy{2}, id, 3, 9)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Agents) != 3 || len(res.Team) != 3 {
		t.Fatalf("agents %v, %d episodes", res.Agents, len(res.Team))
	}
	for k := range team {
		sum := 0.0
		for _, r := range res.PerAgent[k] {
			sum += r
		}
		if res.Team[k] != team[k] || math.Abs(sum-team[k]) > 1e-9 || team[k] >= 0 {
			t.Fatalf("episode %d: team %v, Evaluate %v, per-agent sum %v", k, res.Team[k], team[k], sum)
		}
	}
	if _, err := EvaluateAgents(ctx, constPolicy{0}, "CartPole-v1", 1, 0); !errors.Is(err, ErrConfig) {
		t.Fatalf("single-agent id: %v", err)
	}
}
