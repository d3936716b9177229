package onpolicy

import (
	"fmt"
	"math/rand/v2"

	"herd/algo"
	"herd/env"
)

// Rollout is the on-policy storage of T steps of N vector envs, stored
// step-major (row t·N + i), plus the collection loop both PPO and A2C run.
// Buffers are allocated once by NewRollout; Collect does not allocate.
type Rollout struct {
	T, N, ObsDim, ActDim int

	Obs      []float32 // T·N × ObsDim: the observation each action was taken on
	Actions  []float32 // T·N × ActDim: the sampled (unclipped) actions
	LogProbs []float32 // T·N: log π_old(a|s) at collection time
	Rewards  []float32 // T·N: rewards, plus γ·V(final obs) on truncation
	Dones    []float32 // T·N: 1 where the episode ended at this step
	Values   []float32 // T·N: V_old(s) at collection time
	Adv      []float32 // T·N: filled by GAE
	Returns  []float32 // T·N: Adv + Values

	NextObs    []float32 // N × ObsDim: what the policy acts on next
	LastValues []float32 // N: V(NextObs) after the last Collect

	envActions []float32
	finalV     []float32
}

// NewRollout allocates storage for T steps of n envs.
func NewRollout(T, n, obsDim, actDim int) *Rollout {
	tn := T * n
	return &Rollout{T: T, N: n, ObsDim: obsDim, ActDim: actDim,
		Obs: make([]float32, tn*obsDim), Actions: make([]float32, tn*actDim),
		LogProbs: make([]float32, tn), Rewards: make([]float32, tn), Dones: make([]float32, tn),
		Values: make([]float32, tn), Adv: make([]float32, tn), Returns: make([]float32, tn),
		NextObs: make([]float32, n*obsDim), LastValues: make([]float32, n),
		envActions: make([]float32, n*actDim), finalV: make([]float32, 1),
	}
}

// Reset resets the envs with seed and stores the first observations.
func (ro *Rollout) Reset(envs env.Vector, seed int64) error {
	b, err := envs.Reset(seed)
	if err != nil {
		return fmt.Errorf("onpolicy: reset: %w", err)
	}
	copy(ro.NextObs, b.Obs)
	return nil
}

// Collect runs the agent's stochastic policy for T steps on envs, filling
// the storage, then computes LastValues = V(NextObs). *globalStep advances
// by N per step; every finished episode is reported to log at the global
// step it ended.
//
// The easy-to-miss step: when env i's episode is truncated (time limit) and
// not terminated, the envs have already reset it, so the next observation
// in the batch belongs to a new episode. Its last reward is then
// bootstrapped from the true final observation, r += γ·V(final obs)
// (Pardo et al. 2018, "Time Limits in Reinforcement Learning"; SB3 does the
// same), and Dones marks the step so that GAE does not look across the
// reset. A terminated episode gets no bootstrap.
func (ro *Rollout) Collect(envs env.Vector, agent *Agent, r *rand.Rand, log algo.Logger, globalStep *int64, gamma float32) error {
	n, od, ad := ro.N, ro.ObsDim, ro.ActDim
	for t := range ro.T {
		row := t * n
		copy(ro.Obs[row*od:(row+n)*od], ro.NextObs)
		acts := ro.Actions[row*ad : (row+n)*ad]
		agent.ActionAndValue(acts, ro.LogProbs[row:row+n], ro.Values[row:row+n], ro.NextObs, n, r)
		b, err := envs.Step(agent.EnvActionsTo(ro.envActions, acts))
		if err != nil {
			return fmt.Errorf("onpolicy: step: %w", err)
		}
		*globalStep += int64(n)
		for i := range n {
			k := row + i
			ro.Rewards[k] = b.Rewards[i]
			ro.Dones[k] = 0
			if !b.Done(i) {
				continue
			}
			ro.Dones[k] = 1
			if b.Truncated[i] && !b.Terminated[i] {
				agent.Value(ro.finalV, b.FinalObsRow(i), 1)
				ro.Rewards[k] += gamma * ro.finalV[0]
			}
			if b.Infos[i].HasEpisode {
				log.Episode(*globalStep, b.Infos[i].Episode.Return, b.Infos[i].Episode.Length)
			}
		}
		copy(ro.NextObs, b.Obs)
	}
	agent.Value(ro.LastValues, ro.NextObs, n)
	return nil
}

// Advantages computes Adv with GAE(γ, λ) and Returns = Adv + Values.
func (ro *Rollout) Advantages(gamma, lambda float32) {
	GAE(ro.Adv, ro.Rewards, ro.Values, ro.Dones, ro.LastValues, ro.N, gamma, lambda)
	ReturnsTo(ro.Returns, ro.Adv, ro.Values)
}
