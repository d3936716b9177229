package offpolicy

import (
	"fmt"

	"herd/algo"
	"herd/env"
	"herd/sample"
)

// Assembler is the env-worker side of off-policy experience
// (algo.Assembler): one NStep accumulator per env, turning each vector step
// into the n-step transitions it completes, appended to a
// sample.Transitions with the episodes that ended. With n = 1 it is a
// pass-through that adds the discount γ.
//
// Rows come out env by env, oldest first, so a learner storing them in
// order fills replay exactly as the one-env-at-a-time loop did. No
// allocation once dst has grown to its largest step.
type Assembler struct {
	nstep          []*NStep
	obsDim, actDim int
	tr             Transition
}

var _ algo.Assembler = (*Assembler)(nil)

// NewAssembler returns an assembler for numEnvs envs, n-step returns with
// discount gamma, observations of obsDim and actions of actDim floats.
func NewAssembler(numEnvs, nSteps int, gamma float64, obsDim, actDim int) (*Assembler, error) {
	if numEnvs < 1 || nSteps < 1 || obsDim < 1 || actDim < 1 {
		return nil, fmt.Errorf("offpolicy: assembler needs num_envs, n_steps, obs and action widths ≥ 1, got %d, %d, %d, %d",
			numEnvs, nSteps, obsDim, actDim)
	}
	a := &Assembler{obsDim: obsDim, actDim: actDim}
	for range numEnvs {
		a.nstep = append(a.nstep, NewNStep(nSteps, float32(gamma), obsDim, actDim))
	}
	return a, nil
}

// Add records one vector step of len(b.Rewards) envs: obs are the
// observations acted on, actions the actions taken, b what the envs
// returned (NextObsRow is the true final observation where an episode
// ended, so truncated transitions bootstrap from it). Completed transitions
// and finished episodes are appended to dst.
func (a *Assembler) Add(dst *sample.Transitions, obs, actions []float32, b *env.Batch) error {
	n := len(b.Rewards)
	if n > len(a.nstep) || len(obs) < n*a.obsDim || len(actions) < n*a.actDim {
		return fmt.Errorf("offpolicy: assembler for %d envs got %d envs, %d obs and %d action values",
			len(a.nstep), n, len(obs), len(actions))
	}
	if dst.N == 0 {
		dst.ObsDim, dst.ActDim = a.obsDim, a.actDim
	} else if dst.ObsDim != a.obsDim || dst.ActDim != a.actDim {
		return fmt.Errorf("offpolicy: appending obs %d, action %d rows to transitions of %d, %d", a.obsDim, a.actDim, dst.ObsDim, dst.ActDim)
	}
	d, ad := a.obsDim, a.actDim
	for i := range n {
		ns := a.nstep[i]
		ns.Push(obs[i*d:(i+1)*d], actions[i*ad:(i+1)*ad], b.Rewards[i], b.NextObsRow(i), b.Terminated[i], b.Truncated[i])
		for ns.Pop(&a.tr) {
			AppendTransition(dst, &a.tr)
		}
		if b.Infos[i].HasEpisode {
			dst.Episodes = append(dst.Episodes, sample.Episode{Return: b.Infos[i].Episode.Return,
				Length: b.Infos[i].Episode.Length, At: dst.N})
		}
	}
	return nil
}

// AppendTransition appends one row to dst.
func AppendTransition(dst *sample.Transitions, t *Transition) {
	done := float32(0)
	if t.Done {
		done = 1
	}
	dst.Obs = append(dst.Obs, t.Obs...)
	dst.Actions = append(dst.Actions, t.Action...)
	dst.Rewards = append(dst.Rewards, t.Reward)
	dst.NextObs = append(dst.NextObs, t.NextObs...)
	dst.Discounts = append(dst.Discounts, t.Discount)
	dst.Dones = append(dst.Dones, done)
	dst.N++
}
