package algo

import (
	"context"
	"errors"
	"herd/env"
	"math"
	"slices"
	"strings"
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
	res, err := EvaluateAgents(ctx, constPolicy{2}, env.Maker{}, id, 3, 9)
	if err != nil {
		t.Fatal(err)
	}
	team, err := Evaluate(ctx, constPolicy{2}, env.Maker{}, id, 3, 9)
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
	if _, err := EvaluateAgents(ctx, constPolicy{0}, env.Maker{}, "CartPole-v1", 1, 0); !errors.Is(err, ErrConfig) {
		t.Fatalf("single-agent id: %v", err)
	}
}

// TestEvaluateAgentsTeams checks simple_tag's two teams: each team's
// return is the sum over its agents, and the printed line gives each
// team's return, not the sum over teams.
func TestEvaluateAgentsTeams(t *testing.T) {
	res, err := EvaluateAgents(context.Background(), constPolicy{0}, env.Maker{}, "mpe/simple_tag_v3", 3, 4)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.TeamNames, []string{"adversary", "agent"}) || !slices.Equal(res.TeamOf, []int{0, 0, 0, 1}) || !res.Competitive() {
		t.Fatalf("teams %v of %v", res.TeamNames, res.TeamOf)
	}
	for k, per := range res.PerAgent {
		if want := per[0] + per[1] + per[2]; res.TeamReturns[k][0] != want || res.TeamReturns[k][1] != per[3] {
			t.Fatalf("episode %d: teams %v, agents %v", k, res.TeamReturns[k], per)
		}
	}
	if s := res.String(); !strings.HasPrefix(s, "adversary return ") || !strings.Contains(s, "; agent return ") || strings.Contains(s, "team return") {
		t.Fatalf("line %q", s)
	}
	coop, err := EvaluateAgents(context.Background(), constPolicy{0}, env.Maker{}, "mpe/simple_spread_v3", 1, 4)
	if err != nil || coop.Competitive() || !strings.HasPrefix(coop.String(), "team return ") {
		t.Fatalf("simple_spread: %v, %q", err, coop.String())
	}
}
