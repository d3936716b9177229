package rollout

import (
	"fmt"

	"herd/algo"
	"herd/internal/scratch"
)

// Policy is where a loop's actions come from. Act fills acts for the n
// observations obs (n × observation size) at global env step `step`; the
// loop owns acts and reuses it between calls.
type Policy interface {
	Act(acts *algo.Acts, obs []float32, n int, step int64) error
}

// EnvResetter is implemented by policies whose action draws keep per-env
// state (Ornstein–Uhlenbeck noise); the loops call ResetEnv(i) when env i's
// episode ended, before the next Act.
type EnvResetter = algo.EnvResetter

// Inline is the Policy of a network copy and a sampler in the loop's own
// goroutine: outputs ← Net(obs), acts ← Sampler(outputs, step).
type Inline struct {
	Net     algo.PolicyNet
	Sampler algo.Sampler
	out     []float32
	rows    []float32 // Values' rows, apart from Act's outputs
}

// NewInline returns the inline policy of net and sampler.
func NewInline(net algo.PolicyNet, sampler algo.Sampler) *Inline {
	return &Inline{Net: net, Sampler: sampler}
}

// Act runs the network on obs and samples from its outputs.
func (p *Inline) Act(acts *algo.Acts, obs []float32, n int, step int64) error {
	width := p.Net.OutDim()
	p.out = p.Net.ForwardTo(scratch.Resize(p.out, n*width), obs, n)
	p.Sampler.SampleTo(acts, p.out, n, step)
	return nil
}

// Version is the version of the weights the network holds.
func (p *Inline) Version() uint64 { return p.Net.Version() }

// ResetEnv forwards an episode's end to a network or a sampler that keeps
// per-env state.
func (p *Inline) ResetEnv(i int) {
	if r, ok := p.Net.(algo.EnvResetter); ok {
		r.ResetEnv(i)
	}
	if r, ok := p.Sampler.(algo.EnvResetter); ok {
		r.ResetEnv(i)
	}
}

// StateKeeper is a policy whose rows depend on a recurrent state per env
// as well as on the observation (an LSTM policy): row i of every Act is
// env i's, and the policy advances env i's state by one step. Segments
// records the states a segment starts from (sample.Segment.State), zeroes
// env i's where its episode ends (EnvResetter) and bootstraps a
// truncated episode from env i's state (EnvValue, which does not advance
// it).
type StateKeeper interface {
	// StateDim is the state of one env; 0 for a stateless policy.
	StateDim() int
	// StateTo appends the state of the n envs (n rows of StateDim) to
	// dst[:0].
	StateTo(dst []float32, n int) []float32
	// EnvValue is V(obs) for env i from its current state.
	EnvValue(i int, obs []float32) float32
}

// StateDim is the network's state per env (0: a stateless network).
func (p *Inline) StateDim() int {
	if k, ok := p.Net.(StateKeeper); ok {
		return k.StateDim()
	}
	return 0
}

// StateTo appends the network's per-env states to dst[:0].
func (p *Inline) StateTo(dst []float32, n int) []float32 {
	if k, ok := p.Net.(StateKeeper); ok {
		return k.StateTo(dst, n)
	}
	return dst[:0]
}

// EnvValue is the network's V(obs) for env i (a stateful network's
// StateKeeper.EnvValue; else Values of the one observation).
func (p *Inline) EnvValue(i int, obs []float32) float32 {
	if k, ok := p.Net.(StateKeeper); ok {
		return k.EnvValue(i, obs)
	}
	v, _ := p.Values(nil, obs, 1)
	return v[0]
}

// checkActs reports actions of the wrong length for n envs × actDim.
func checkActs(acts *algo.Acts, n, actDim int) error {
	if len(acts.Actions) != n*actDim || len(acts.EnvActions) != n*actDim {
		return fmt.Errorf("rollout: the policy gave %d actions and %d env actions for %d envs × %d",
			len(acts.Actions), len(acts.EnvActions), n, actDim)
	}
	return nil
}

// valuesTo is the optional method of networks that compute V(s) alone,
// cheaper than whole rows (onpolicy's policy: the critic only).
type valuesTo interface {
	ValuesTo(dst, obs []float32, n int) []float32
}

// Values returns V(obs) for n observations in dst (grown as needed): from
// the network's ValuesTo if it has one, else the last column of its rows
// (the on-policy networks end every row with V(s)).
func (p *Inline) Values(dst, obs []float32, n int) ([]float32, error) {
	if v, ok := p.Net.(valuesTo); ok {
		return v.ValuesTo(scratch.Resize(dst, n), obs, n), nil
	}
	width := p.Net.OutDim()
	p.rows = p.Net.ForwardTo(scratch.Resize(p.rows, n*width), obs, n)
	dst = scratch.Resize(dst, n)
	for i := range n {
		dst[i] = p.rows[(i+1)*width-1]
	}
	return dst, nil
}

// Slots is the Policy of one network and a sampler per env: one batched
// forward pass, then env j's own sampler on row j. Each env's draws come
// from its own stream, so the actions do not depend on how envs are
// spread over workers (the dataflow plans' same bits for any worker
// count).
type Slots struct {
	*Inline
	samplers []algo.Sampler
	one      algo.Acts
}

// NewSlots returns the policy of net with samplers[j] for env j.
func NewSlots(net algo.PolicyNet, samplers []algo.Sampler) *Slots {
	return &Slots{Inline: &Inline{Net: net}, samplers: samplers}
}

// Act runs the network on all n observations and samples row j with
// sampler j.
func (p *Slots) Act(acts *algo.Acts, obs []float32, n int, step int64) error {
	if n != len(p.samplers) {
		return fmt.Errorf("rollout: %d observations for %d samplers", n, len(p.samplers))
	}
	w := p.Net.OutDim()
	p.out = p.Net.ForwardTo(scratch.Resize(p.out, n*w), obs, n)
	acts.Actions, acts.EnvActions = acts.Actions[:0], acts.EnvActions[:0]
	acts.LogProbs, acts.Values = acts.LogProbs[:0], acts.Values[:0]
	for j, s := range p.samplers {
		s.SampleTo(&p.one, p.out[j*w:(j+1)*w], 1, step)
		acts.Actions = append(acts.Actions, p.one.Actions...)
		acts.EnvActions = append(acts.EnvActions, p.one.EnvActions...)
		acts.LogProbs = append(acts.LogProbs, p.one.LogProbs...)
		acts.Values = append(acts.Values, p.one.Values...)
	}
	return nil
}

// ResetEnv forwards an episode's end to a network that keeps per-env
// state (a recurrent policy's env i) and to env i's sampler, when it
// keeps per-env state.
func (p *Slots) ResetEnv(i int) {
	if r, ok := p.Net.(algo.EnvResetter); ok {
		r.ResetEnv(i)
	}
	if r, ok := p.samplers[i].(algo.EnvResetter); ok {
		r.ResetEnv(0)
	}
}
