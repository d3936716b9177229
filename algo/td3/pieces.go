package td3

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"

	"herd/algo"
	"herd/algo/internal/offpolicy"
	"herd/internal/rng"
	"herd/internal/twin"
	"herd/nn"
	"herd/weights"
)

// Pieces cuts TD3 into the pieces executors place (algo.Pieces):
//   - policy: μ(s) = tanh(f(s))·scale + bias, actions in the env's units
//     (offpolicy.MLPPolicy with the tanh head);
//   - sampler: uniformly random actions before learning starts, then μ(s)
//     plus Gaussian or Ornstein–Uhlenbeck noise (offpolicy.NoisySampler,
//     with per-env OU state);
//   - assembler and replay: one-step transitions, uniform replay;
//   - learner: clipped double-Q critics with target policy smoothing,
//     delayed actor and target updates (Learner).
func Pieces(h algo.Header, c algo.Config, sp algo.Spaces) (*algo.Pieces, error) {
	cfg, err := algo.ConfigAs[*Config]("td3", c, h)
	if err != nil {
		return nil, err
	}
	p, err := newPieces(h, cfg, sp)
	if err != nil {
		return nil, fmt.Errorf("%w: td3: %w", algo.ErrConfig, err)
	}
	return offpolicy.NewPieces(p.Policy, p.Sampler, p.Assembler, p.Replay, p.newLearner), nil
}

// pieces are the shared actor pieces plus TD3's config.
type pieces struct {
	*offpolicy.ActorPieces
	cfg *Config
}

func newPieces(h algo.Header, cfg *Config, sp algo.Spaces) (*pieces, error) {
	ap, err := offpolicy.NewActorPieces(h, sp)
	if err != nil {
		return nil, err
	}
	ap.LearningStarts, ap.BufferSize, ap.Gamma = cfg.LearningStarts, cfg.BufferSize, cfg.Gamma
	ap.Sigma, ap.OU = cfg.ExplorationNoise, cfg.NoiseType == "ou"
	p := &pieces{ActorPieces: ap, cfg: cfg}
	ap.NewAgent = p.newAgent
	return p, nil
}

// newAgent builds the networks with the run's initial weights (stream
// "td3/init"), as every piece that holds one does.
func (p *pieces) newAgent() (*Agent, error) {
	return newAgent(p.ObsDim, p.Low, p.High, p.cfg.NetArch, rng.New(p.H.Seed, "td3/init", 0))
}

// Learner is TD3's learner (algo.TransitionLearner): actor, twin critics,
// their targets and two Adams, with the streams "td3/learner" (smoothing
// noise) and "td3/replay" (minibatches); the schedule, Grad and Apply are
// offpolicy.DPG's.
type Learner struct {
	offpolicy.DPG
	p                    *pieces
	agent                *Agent
	qf1Target, qf2Target *nn.Critic
	learnRNG             *rand.Rand
	learnSrc, sampleSrc  *rand.PCG // the streams' sources, which a checkpoint saves
	par                  *twin.Pair
	critics, targets     *offpolicy.Twin
	nextAct, nextQ       []float32
}

func (p *pieces) newLearner() (*Learner, error) {
	cfg, B, actDim := p.cfg, p.cfg.BatchSize, len(p.Low)
	agent, err := p.newAgent()
	if err != nil {
		return nil, err
	}
	l := &Learner{p: p, agent: agent, qf1Target: agent.QF[0].Clone(), qf2Target: agent.QF[1].Clone(),
		nextAct: make([]float32, B*actDim),
		nextQ:   make([]float32, B)} // y = r + γ(1 − d) min_i Q'_i(s', μ'(s') + clip(ε))
	l.DPG = offpolicy.DPG{Name: "td3", Actor: agent.Actor, TargetActor: agent.Actor.Clone(), Head: agent.Head,
		Q1: agent.QF[0], QParams: append(slices.Clone(agent.QF[0].Params()), agent.QF[1].Params()...),
		BatchSize: B, LearningStarts: cfg.LearningStarts, PolicyFrequency: cfg.PolicyFrequency, Tau: cfg.Tau,
		Scalars: Scalars, CriticGrad: l.criticGrad,
		DQ: make([]float32, B), Pi: make([]float32, B*actDim), DOut: make([]float32, B*actDim)}
	l.Targets = [][2][]*nn.Param{{l.TargetActor.Params(), l.Actor.Params()},
		{l.qf1Target.Params(), agent.QF[0].Params()}, {l.qf2Target.Params(), agent.QF[1].Params()}}
	l.SetSlot(0)
	if l.QOpt, err = nn.NewAdam(nn.AdamConfig{LR: float32(cfg.LearningRate)}); err != nil {
		return nil, err
	}
	if l.ActorOpt, err = nn.NewAdam(nn.AdamConfig{LR: float32(cfg.LearningRate)}); err != nil {
		return nil, err
	}
	for _, net := range []*nn.Critic{agent.QF[0], agent.QF[1], l.qf1Target, l.qf2Target} {
		net.Net.Reserve(B)
	}
	l.Actor.Reserve(B)
	l.TargetActor.Reserve(B)
	// The twin critics run side by side on two goroutines (bit-identical
	// to one after the other: see offpolicy.Twin).
	l.par = twin.NewIf(cfg.Parallel)
	l.critics = offpolicy.NewTwin(agent.QF[0], agent.QF[1], l.par, B)
	l.targets = offpolicy.NewTwin(l.qf1Target, l.qf2Target, l.par, B)
	return l, nil
}

// Close stops the helper goroutine.
func (l *Learner) Close() error { l.par.Close(); return nil }

// Model returns the agent the learner trains (to save and evaluate).
func (l *Learner) Model() algo.Model { return l.agent }

// Learn takes the updates due in (prev, step] (offpolicy.DPG.LearnWith).
func (l *Learner) Learn(ctx context.Context, rb algo.Replay, prev, step int64) ([]algo.Stat, error) {
	return l.LearnWith(ctx, l, rb, prev, step)
}

// criticTarget computes the clipped double-Q target y into nextQ.
func (l *Learner) criticTarget() {
	cfg, mb, B, actDim := l.p.cfg, &l.Mb, l.p.cfg.BatchSize, len(l.p.Low)
	low, high := l.p.Low, l.p.High
	// Target policy smoothing (Fujimoto et al. 2018, eq. 14):
	// ã = clip(μ'(s') + clip(ε, −c, c)·scale, low, high), ε ~ N(0, σ²).
	l.Head.ActionTo(l.nextAct, l.TargetActor.Forward(mb.NextObs, B))
	for i := range l.nextAct {
		j := i % actDim
		eps := clamp(l.learnRNG.NormFloat64()*cfg.PolicyNoise, -cfg.NoiseClip, cfg.NoiseClip)
		l.nextAct[i] = clamp32(l.nextAct[i]+float32(eps)*l.Head.Scale[j], low[j], high[j])
	}
	q1n, q2n := l.targets.Forward(mb.NextObs, l.nextAct, B)
	for i := range B {
		l.nextQ[i] = mb.Rewards[i] + mb.Discounts[i]*(1-mb.Dones[i])*min(q1n[i], q2n[i])
	}
}

// criticGrad sets both critics' gradients of the clipped double-Q loss
// and appends the critics' scalars to dst (Scalars' order).
func (l *Learner) criticGrad(dst []float64) []float64 {
	l.criticTarget()
	qfLoss, q1Mean, q2Mean := l.critics.FitGrad(l.Mb.Obs, l.Mb.Actions, l.nextQ, l.p.cfg.BatchSize)
	return append(dst, q1Mean, q2Mean, qfLoss/2)
}

var _ algo.SplitLearner = (*Learner)(nil)

// SetSlot makes the learner draw from ("td3/learner", i) and
// ("td3/replay", i).
func (l *Learner) SetSlot(i int) {
	l.learnSrc, l.sampleSrc = rng.Source(l.p.H.Seed, "td3/learner", i), rng.Source(l.p.H.Seed, "td3/replay", i)
	l.learnRNG, l.SampleRNG = rand.New(l.learnSrc), rand.New(l.sampleSrc)
}

// LearnerState is what a checkpoint saves of the learner
// (offpolicy.StateLearner): the networks and their targets, both Adams,
// both streams, the counts (the update count is the policy_frequency
// phase) and the actor's last loss (logged until the next actor step).
func (l *Learner) LearnerState() offpolicy.LearnerState {
	return offpolicy.LearnerState{Params: l.stateParams(),
		Opts:    []offpolicy.OptState{{Opt: l.QOpt, Params: l.QParams}, {Opt: l.ActorOpt, Params: l.Actor.Params()}},
		Streams: []*rand.PCG{l.learnSrc, l.sampleSrc}, Values: []any{&l.Updates, &l.Counts, &l.ActorLoss}}
}

func (l *Learner) stateParams() []*nn.Param {
	return offpolicy.Concat(l.Actor.Params(), l.TargetActor.Params(), l.QParams, l.qf1Target.Params(), l.qf2Target.Params())
}

// State is the actor, both critics and the three targets.
func (l *Learner) State() *weights.Version { return weights.New(uint64(l.Updates), l.stateParams()) }

// SetState copies s into the networks.
func (l *Learner) SetState(s *weights.Version) error { return l.SetStateOf(s, l.stateParams()) }
