package algo

import (
	"context"
	"fmt"
	"math"

	"herd/env"
	"herd/internal/rng"
)

// Evaluate runs the policy for the given number of episodes on a fresh env
// (env.Make with its default time limit) and returns each episode's
// undiscounted return. Episode k is reset with a seed derived from (seed,
// "eval/env", k), so the same arguments give the same returns. It checks ctx
// between episodes.
func Evaluate(ctx context.Context, p Policy, mk env.Maker, envID string, episodes int, seed uint64) ([]float64, error) {
	if episodes < 1 {
		return nil, fmt.Errorf("%w: episodes must be >= 1, got %d", ErrConfig, episodes)
	}
	e, err := mk.Make(envID, evalOptions(p)...)
	if err != nil {
		return nil, fmt.Errorf("algo: evaluate: %w", err)
	}
	defer e.Close()
	act := make([]float32, e.ActionSpace().Dim())
	actOf := agentActor(p, e)
	returns := make([]float64, 0, episodes)
	for k := range episodes {
		if err := ctx.Err(); err != nil {
			return returns, err
		}
		obs, _, err := e.Reset(int64(rng.Derive(seed, "eval/env", k) >> 1))
		if err != nil {
			return returns, fmt.Errorf("algo: evaluate: %w", err)
		}
		if r, ok := p.(EnvResetter); ok {
			r.ResetEnv(0) // a recurrent policy starts each episode from the zero state
		}
		var ret float64
		for {
			var r float64
			var term, trunc bool
			obs, r, term, trunc, _, err = e.Step(actOf(act, obs))
			if err != nil {
				return returns, fmt.Errorf("algo: evaluate: episode %d: %w", k, err)
			}
			ret += r
			if term || trunc {
				break
			}
		}
		returns = append(returns, ret)
	}
	return returns, nil
}

// MeanStd returns the mean and population standard deviation of xs (NaN
// for none).
func MeanStd(xs []float64) (mean, std float64) {
	if len(xs) == 0 {
		return math.NaN(), math.NaN()
	}
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	for _, x := range xs {
		std += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(std / float64(len(xs)))
}

// evalOptions lets the agents of a multi-agent env have different action
// spaces when p acts for each with its own policy (AgentPolicy).
func evalOptions(p Policy) []env.Option {
	if _, ok := p.(AgentPolicy); ok {
		return []env.Option{env.WithAgentActionSpaces()}
	}
	return nil
}

// agentActor returns p.Act, or, for an AgentPolicy on a multi-agent env
// (a TurnEnv), its ActAgent for the agent whose turn it is.
func agentActor(p Policy, e env.Env) func(dst, obs []float32) []float32 {
	ap, ok := p.(AgentPolicy)
	t, ok2 := e.(*env.TurnEnv)
	if !ok || !ok2 {
		return p.Act
	}
	return func(dst, obs []float32) []float32 { return ap.ActAgent(dst, obs, t.Agent()) }
}
