package offpolicy

import (
	"fmt"
	"math/rand/v2"

	"herd/algo"
	"herd/env"
	"herd/nn"
	"herd/sample"
)

// NewPieces wraps an algorithm's typed piece constructors as algo.Pieces
// (Go has no covariant function types, so each needs a small adapter).
func NewPieces[S algo.Sampler, L algo.TransitionLearner](
	policy func() (*MLPPolicy, error),
	sampler func(numEnvs int, r *rand.Rand) (S, error),
	assembler func(numEnvs int) (*Assembler, error),
	replay func() (*Replay, error),
	learner func() (L, error)) *algo.Pieces {
	return &algo.Pieces{
		NewPolicy: func() (algo.PolicyNet, error) { return nilOr[algo.PolicyNet](policy()) },
		NewSampler: func(n int, r *rand.Rand) (algo.Sampler, error) {
			if n < 1 || r == nil {
				return nil, fmt.Errorf("offpolicy: a sampler needs num_envs ≥ 1 and a random stream, got %d, %v", n, r)
			}
			return nilOr[algo.Sampler](sampler(n, r))
		},
		OffPolicy: algo.OffPolicy{
			NewAssembler:         func(n int) (algo.Assembler, error) { return nilOr[algo.Assembler](assembler(n)) },
			NewReplay:            func() (algo.Replay, error) { return nilOr[algo.Replay](replay()) },
			NewTransitionLearner: func() (algo.TransitionLearner, error) { return nilOr[algo.TransitionLearner](learner()) },
			Checkpoint:           Checkpoint,
		},
	}
}

// nilOr converts v to the interface I, keeping a failed constructor's
// result a nil interface rather than a typed nil.
func nilOr[I any, T any](v T, err error) (I, error) {
	var zero I
	if err != nil {
		return zero, err
	}
	i, _ := any(v).(I)
	return i, nil
}

// LogStats passes a learner's scalars to the logger.
func LogStats(log algo.Logger, stats []algo.Stat) {
	for _, s := range stats {
		log.Scalar(s.Name, s.Value)
	}
}

// ActorPieces are the policy, sampler, assembler and replay that TD3 and
// DDPG share: a deterministic actor μ(s) = tanh(f(s))·scale + bias (the
// policy's outputs are actions in the env's units), NoisySampler
// exploration, one-step transitions and uniform replay.
type ActorPieces struct {
	H              algo.Header
	Space          env.Space
	ObsDim         int
	ObsEncoding    sample.ObsEncoding // the replay's (algo.ReplayObsEncoding)
	Low, High      []float32
	LearningStarts int
	BufferSize     int
	Gamma          float64
	// Sigma is the exploration noise σ in action-scale units; OU selects
	// Ornstein–Uhlenbeck noise instead of independent Gaussian noise.
	Sigma float64
	OU    bool
	// NewAgent builds the networks with the run's initial weights.
	NewAgent func() (*DPGAgent, error)
}

// NewActorPieces checks sp's action space (a bounded Box) and fills the
// shapes of ActorPieces.
func NewActorPieces(h algo.Header, sp algo.Spaces) (*ActorPieces, error) {
	low, high, err := BoxBounds(h.Env, sp.Act)
	if err != nil {
		return nil, err
	}
	if sp.Obs == nil || sp.Obs.Dim() < 1 {
		return nil, fmt.Errorf("observation space %v", sp.Obs)
	}
	return &ActorPieces{H: h, Space: sp.Act, ObsDim: sp.Obs.Dim(), ObsEncoding: algo.ReplayObsEncoding(sp.Obs), Low: low, High: high}, nil
}

// Policy is an actor with the run's initial weights, acting with μ(s).
func (p *ActorPieces) Policy() (*MLPPolicy, error) {
	a, err := p.NewAgent()
	if err != nil {
		return nil, err
	}
	return ActorPolicy(a.Actor, a.Head), nil
}

// ActorPolicy is the policy μ(s) = head(actor(s)) on actor's weights.
func ActorPolicy(actor *nn.MLP, head *nn.TanhActor) *MLPPolicy {
	return &MLPPolicy{Net: actor, Head: head.ActionTo}
}

// Sampler is the exploration of numEnvs envs drawing from r.
func (p *ActorPieces) Sampler(numEnvs int, r *rand.Rand) (*NoisySampler, error) {
	head, err := nn.NewTanhActor(p.Low, p.High)
	if err != nil {
		return nil, err
	}
	s := &NoisySampler{Space: p.Space, Scale: head.Scale, Low: p.Low, High: p.High,
		LearningStarts: int64(p.LearningStarts), Sigma: p.Sigma, R: r}
	if p.OU {
		s.OU = NewOU(numEnvs*len(p.Low), p.Sigma)
	}
	return s, nil
}

// Assembler makes one-step transitions of numEnvs envs.
func (p *ActorPieces) Assembler(numEnvs int) (*Assembler, error) {
	return NewAssembler(numEnvs, 1, p.Gamma, p.ObsDim, len(p.Low))
}

// Replay is the run's uniform replay memory.
func (p *ActorPieces) Replay() (*Replay, error) {
	return NewReplay(ReplayConfig{Capacity: p.BufferSize, ObsDim: p.ObsDim, ObsEncoding: p.ObsEncoding, ActDim: len(p.Low), NSteps: 1, Gamma: p.Gamma,
		Locking: p.H.Runtime.Locking()})
}
