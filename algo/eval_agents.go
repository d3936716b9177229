package algo

import (
	"context"
	"fmt"
	"strings"

	"herd/env"
	"herd/internal/rng"
)

// AgentReturns are the returns of a multi-agent evaluation.
type AgentReturns struct {
	// Agents are the env's possible agents.
	Agents []string
	// PerAgent[k][j] is agent j's undiscounted return in episode k.
	PerAgent [][]float64
	// Team[k] is the sum over agents of episode k's returns: the return
	// of a cooperative env, meaningless for a competitive one (TeamNames).
	Team []float64
	// TeamNames are the env's teams (env.AgentTeams): one for a
	// cooperative env, more for a competitive one (simple_tag's
	// adversary and agent); TeamOf[j] is agent j's team.
	TeamNames []string
	TeamOf    []int
	// TeamReturns[k][i] is the sum of team i's agents' returns in
	// episode k.
	TeamReturns [][]float64
}

// Competitive reports whether the env has more than one team.
func (r AgentReturns) Competitive() bool { return len(r.TeamNames) > 1 }

// TeamColumn returns team i's return in every episode.
func (r AgentReturns) TeamColumn(i int) []float64 {
	col := make([]float64, len(r.TeamReturns))
	for k := range r.TeamReturns {
		col[k] = r.TeamReturns[k][i]
	}
	return col
}

// EvaluateAgents runs a shared-parameter policy on a multi-agent env id
// (env.IsParallel) with the episodes and seeds of Evaluate, so its team
// returns are Evaluate's returns, and also records each agent's return.
// The policy acts for every agent in turn (env.TurnEnv).
func EvaluateAgents(ctx context.Context, p Policy, mk env.Maker, envID string, episodes int, seed uint64) (AgentReturns, error) {
	if episodes < 1 {
		return AgentReturns{}, fmt.Errorf("%w: episodes must be >= 1, got %d", ErrConfig, episodes)
	}
	if !mk.IsParallel(envID) {
		return AgentReturns{}, fmt.Errorf("%w: %s is not a multi-agent env", ErrConfig, envID)
	}
	e, err := mk.Make(envID, evalOptions(p)...)
	if err != nil {
		return AgentReturns{}, fmt.Errorf("algo: evaluate agents: %w", err)
	}
	defer e.Close()
	t, ok := e.(*env.TurnEnv)
	if !ok {
		return AgentReturns{}, fmt.Errorf("algo: evaluate agents: %s built %T, not a TurnEnv", envID, e)
	}
	out := AgentReturns{Agents: t.Parallel().PossibleAgents()}
	out.TeamNames, out.TeamOf = env.AgentTeams(t.Parallel())
	act := make([]float32, e.ActionSpace().Dim())
	actOf := agentActor(p, e)
	for k := range episodes {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		obs, _, err := e.Reset(int64(rng.Derive(seed, "eval/env", k) >> 1))
		if err != nil {
			return out, fmt.Errorf("algo: evaluate agents: %w", err)
		}
		per := make([]float64, len(out.Agents))
		team := 0.0
		for {
			var r float64
			var term, trunc bool
			obs, r, term, trunc, _, err = e.Step(actOf(act, obs))
			if err != nil {
				return out, fmt.Errorf("algo: evaluate agents: episode %d: %w", k, err)
			}
			if t.Advanced() {
				rews := t.LastRewards()
				for j, a := range out.Agents {
					per[j] += rews[a]
				}
			}
			team += r
			if term || trunc {
				break
			}
		}
		teams := make([]float64, len(out.TeamNames))
		for j, v := range per {
			teams[out.TeamOf[j]] += v
		}
		out.PerAgent = append(out.PerAgent, per)
		out.TeamReturns = append(out.TeamReturns, teams)
		out.Team = append(out.Team, team)
	}
	return out, nil
}

// String is "team return M ± S; agent_0 M ± S, …" over the episodes, or,
// for a competitive env, each team's return instead of their sum:
// "adversary return M ± S; agent return M ± S; adversary_0 M ± S, …".
func (r AgentReturns) String() string {
	var b strings.Builder
	if r.Competitive() {
		for i, name := range r.TeamNames {
			m, s := MeanStd(r.TeamColumn(i))
			if i > 0 {
				b.WriteString("; ")
			}
			fmt.Fprintf(&b, "%s return %.2f ± %.2f", name, m, s)
		}
	} else {
		m, s := MeanStd(r.Team)
		fmt.Fprintf(&b, "team return %.2f ± %.2f", m, s)
	}
	for j, a := range r.Agents {
		col := make([]float64, len(r.PerAgent))
		for k := range r.PerAgent {
			col[k] = r.PerAgent[k][j]
		}
		m, s := MeanStd(col)
		fmt.Fprintf(&b, "; %s %.2f ± %.2f", a, m, s)
	}
	return b.String()
}
