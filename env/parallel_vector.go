package env

import (
	"fmt"
	"maps"
	"slices"
)

// ParallelVector steps N copies of a Parallel env, with the same-step
// autoreset of Vector: when env i's episode ends (Agents() empty after a
// step), it is reset at once, and its ParallelStep holds the transition
// that ended the episode (rewards, flags, infos, FinalObs) and the first
// observations of the next one (Obs, Agents).
//
// Reset(seed ≥ 0) resets env i with VectorSeed(seed, i); automatic resets
// continue each env's stream. Step checks every action of every env
// before stepping any. The returned steps and their maps are owned by the
// vector and overwritten by the next call.
//
// A vector of a ParallelBatch (NewParallelVectorOf: a remote multi-agent
// id) has no local envs: the batch resets and steps all N envs in one
// call each, with the same autoreset.
type ParallelVector struct {
	envs     []Parallel
	batch    ParallelBatch
	possible []string
	obs      []Space // per possible agent, of env 0
	acts     []Space // per possible agent, of env 0
	steps    []ParallelStep
	closed   bool
}

// ParallelStep is env i's part of a ParallelVector Reset or Step.
type ParallelStep struct {
	// Obs holds the latest observation of every agent the env returned one
	// for: the next episode's first ones after a reset, else those of the
	// step (including agents that just left); agents in Agents act on them.
	Obs map[string][]float32
	// Agents are the agents that act next (all of them after a reset).
	Agents []string
	// Rewards, Terminations, Truncations and Infos describe the transition
	// of each agent that acted (empty after Reset).
	Rewards      map[string]float64
	Terminations map[string]bool
	Truncations  map[string]bool
	Infos        map[string]Info
	// Done is true when the episode ended in this step and the env was
	// reset; FinalObs then holds the last observation of each agent that
	// acted in it.
	Done     bool
	FinalObs map[string][]float32
	// ObsInfos are the infos that came with Obs: the reset's after a
	// reset or autoreset, else Infos (action masks for the next step).
	ObsInfos map[string]Info
	// State is the env's global state for Obs, and FinalState for
	// FinalObs (set when Done), when the env has one (GlobalState); nil
	// otherwise.
	State, FinalState []float32
	resetInfos        map[string]Info
}

// ParallelBatch holds N multi-agent envs that a ParallelVector steps in
// one call (a remote session of herd/env/remote). Reset and Step fill
// steps as ParallelVector's Reset and Step return them; Step gets actions
// already checked.
type ParallelBatch interface {
	Reset(seeds []int64, steps []ParallelStep) error
	Step(actions []map[string][]float32, steps []ParallelStep) error
	// GlobalStateSpace is the envs' global state space, or nil.
	GlobalStateSpace() Space
	Close() error
}

// NewParallelVectorOf is the ParallelVector of b's n envs, whose agents
// are possible with the observation and action spaces obs and acts.
func NewParallelVectorOf(b ParallelBatch, n int, possible []string, obs, acts []Space) *ParallelVector {
	return &ParallelVector{batch: b, possible: possible, obs: obs, acts: acts, steps: NewParallelSteps(n)}
}

// ParallelFactory builds the env for vector slot i.
type ParallelFactory func(slot int) (Parallel, error)

// NewParallelVector builds n envs with factory; they must have the same
// agents with the same spaces.
func NewParallelVector(n int, factory ParallelFactory) (*ParallelVector, error) {
	if n <= 0 {
		return nil, fmt.Errorf("%w: vector of %d envs, want > 0", ErrInvalidOption, n)
	}
	if factory == nil {
		return nil, fmt.Errorf("%w: nil env factory", ErrInvalidOption)
	}
	v := &ParallelVector{}
	fail := func(err error) (*ParallelVector, error) {
		for _, e := range v.envs {
			e.Close()
		}
		return nil, err
	}
	for i := range n {
		e, err := factory(i)
		if err != nil {
			return fail(fmt.Errorf("env: parallel vector slot %d: %w", i, err))
		}
		v.envs = append(v.envs, e)
		if i == 0 {
			v.possible = slices.Clone(e.PossibleAgents())
			for _, a := range v.possible {
				s, err := e.ActionSpace(a)
				if err != nil {
					return fail(err)
				}
				os, err := e.ObservationSpace(a)
				if err != nil {
					return fail(err)
				}
				v.acts, v.obs = append(v.acts, s), append(v.obs, os)
			}
			continue
		}
		if !slices.Equal(e.PossibleAgents(), v.possible) {
			return fail(fmt.Errorf("%w: parallel vector slot %d has agents %v, slot 0 %v", ErrInvalidOption, i, e.PossibleAgents(), v.possible))
		}
		for j, a := range v.possible {
			s, err := e.ActionSpace(a)
			if err != nil {
				return fail(err)
			}
			if s.String() != v.acts[j].String() {
				return fail(fmt.Errorf("%w: parallel vector slot %d agent %s has action space %v, slot 0 %v", ErrInvalidOption, i, a, s, v.acts[j]))
			}
		}
	}
	v.steps = NewParallelSteps(n)
	return v, nil
}

// NumEnvs is N.
func (v *ParallelVector) NumEnvs() int { return len(v.steps) }

// PossibleAgents is the agents of every env.
func (v *ParallelVector) PossibleAgents() []string { return v.possible }

// ObservationSpace is agent j's (PossibleAgents order) observation space.
func (v *ParallelVector) ObservationSpace(j int) Space { return v.obs[j] }

// Env returns env i, or nil for a remote vector (its envs live on the
// server).
func (v *ParallelVector) Env(i int) Parallel {
	if v.batch != nil {
		return nil
	}
	return v.envs[i]
}

// globalStateSpace is the envs' global state space (GlobalState): env
// 0's, or for a remote vector the one its server sends; nil when they
// have none.
func (v *ParallelVector) globalStateSpace() Space {
	if v.batch != nil {
		return v.batch.GlobalStateSpace()
	}
	if g, ok := v.envs[0].(GlobalState); ok {
		return g.GlobalStateSpace()
	}
	return nil
}

// live is the agents of env i that act next.
func (v *ParallelVector) live(i int) []string {
	if v.batch != nil {
		return v.steps[i].Agents
	}
	return v.envs[i].Agents()
}

// Reset resets every env (see ParallelVector on seeding).
func (v *ParallelVector) Reset(seed int64) ([]ParallelStep, error) {
	if v.closed {
		return nil, fmt.Errorf("%w: parallel vector Reset", ErrClosed)
	}
	if v.batch != nil {
		seeds := make([]int64, len(v.steps))
		for i := range seeds {
			seeds[i] = VectorSeed(seed, i)
		}
		if err := v.batch.Reset(seeds, v.steps); err != nil {
			return nil, fmt.Errorf("env: parallel vector: reset: %w", err)
		}
		return v.steps, nil
	}
	for i, e := range v.envs {
		obs, infos, err := e.Reset(VectorSeed(seed, i))
		if err != nil {
			return nil, fmt.Errorf("env: parallel vector slot %d: reset: %w", i, err)
		}
		s := &v.steps[i]
		clear(s.Rewards)
		clear(s.Terminations)
		clear(s.Truncations)
		clear(s.FinalObs)
		s.Done = false
		copyObs(s.Obs, obs)
		clear(s.Infos)
		maps.Copy(s.Infos, infos)
		s.ObsInfos = s.Infos
		s.Agents = e.Agents()
		s.State, s.FinalState = stateOf(e, s.State), s.FinalState[:0]
	}
	return v.steps, nil
}

// stateOf is e's global state (GlobalState) in buf's memory, or nil.
func stateOf(e Parallel, buf []float32) []float32 {
	if g, ok := e.(GlobalState); ok {
		return g.GlobalState(buf)
	}
	return nil
}

// copyObs copies src into dst's own buffers (reused across calls), and
// drops agents src does not have.
func copyObs(dst, src map[string][]float32) {
	for a := range dst {
		if _, ok := src[a]; !ok {
			delete(dst, a)
		}
	}
	for a, o := range src {
		b := dst[a]
		if cap(b) < len(o) {
			b = make([]float32, len(o))
		}
		b = b[:len(o)]
		copy(b, o)
		dst[a] = b
	}
}

// Step takes one action map per env (the agents of its Agents()).
func (v *ParallelVector) Step(actions []map[string][]float32) ([]ParallelStep, error) {
	if v.closed {
		return nil, fmt.Errorf("%w: parallel vector Step", ErrClosed)
	}
	if len(actions) != len(v.steps) {
		return nil, fmt.Errorf("%w: parallel vector of %d envs got %d action maps", ErrInvalidAction, len(v.steps), len(actions))
	}
	for i := range v.steps {
		live := v.live(i)
		if len(actions[i]) != len(live) {
			return nil, fmt.Errorf("%w: parallel vector slot %d wants actions for %v, got %d", ErrInvalidAction, i, live, len(actions[i]))
		}
		for _, a := range live {
			act, ok := actions[i][a]
			if !ok {
				return nil, fmt.Errorf("%w: parallel vector slot %d: no action for %s", ErrInvalidAction, i, a)
			}
			j := slices.Index(v.possible, a)
			if err := CheckAction(v.acts[j], act); err != nil {
				return nil, fmt.Errorf("parallel vector slot %d agent %s: %w", i, a, err)
			}
		}
	}
	if v.batch != nil {
		if err := v.batch.Step(actions, v.steps); err != nil {
			return nil, fmt.Errorf("env: parallel vector: %w", err)
		}
		return v.steps, nil
	}
	for i, e := range v.envs {
		obs, rew, term, trunc, infos, err := e.Step(actions[i])
		if err != nil {
			return nil, fmt.Errorf("env: parallel vector slot %d: %w", i, err)
		}
		s := &v.steps[i]
		clear(s.Rewards)
		maps.Copy(s.Rewards, rew)
		clear(s.Terminations)
		maps.Copy(s.Terminations, term)
		clear(s.Truncations)
		maps.Copy(s.Truncations, trunc)
		clear(s.Infos)
		maps.Copy(s.Infos, infos)
		s.Done = len(e.Agents()) == 0
		s.ObsInfos = s.Infos
		if !s.Done {
			copyObs(s.Obs, obs)
			s.Agents = e.Agents()
			s.State = stateOf(e, s.State)
			continue
		}
		copyObs(s.FinalObs, obs)
		s.FinalState = stateOf(e, s.FinalState)
		obs, resetInfos, err := e.Reset(NoSeed)
		if err != nil {
			return nil, fmt.Errorf("env: parallel vector slot %d: autoreset: %w", i, err)
		}
		if s.resetInfos == nil {
			s.resetInfos = map[string]Info{}
		}
		clear(s.resetInfos)
		maps.Copy(s.resetInfos, resetInfos)
		s.ObsInfos = s.resetInfos
		copyObs(s.Obs, obs)
		s.Agents = e.Agents()
		s.State = stateOf(e, s.State)
	}
	return v.steps, nil
}

// Close closes every env.
func (v *ParallelVector) Close() error {
	if v.closed {
		return nil
	}
	v.closed = true
	if v.batch != nil {
		return v.batch.Close()
	}
	var first error
	for _, e := range v.envs {
		if err := e.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// NewParallelSteps is n empty ParallelSteps with their maps made.
func NewParallelSteps(n int) []ParallelStep {
	steps := make([]ParallelStep, n)
	for i := range steps {
		steps[i] = ParallelStep{
			Obs: map[string][]float32{}, Rewards: map[string]float64{}, Terminations: map[string]bool{},
			Truncations: map[string]bool{}, Infos: map[string]Info{}, FinalObs: map[string][]float32{},
		}
	}
	return steps
}
