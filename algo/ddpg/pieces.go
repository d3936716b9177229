package ddpg

import (
	"context"
	"fmt"
	"math/rand/v2"

	"herd/algo"
	"herd/algo/internal/offpolicy"
	"herd/internal/rng"
	"herd/internal/twin"
	"herd/nn"
	"herd/weights"
)

// Pieces cuts DDPG into the pieces executors place (algo.Pieces):
//   - policy: μ(s) = tanh(f(s))·scale + bias, actions in the env's units
//     (offpolicy.MLPPolicy with the tanh head);
//   - sampler: uniformly random actions before learning starts, then μ(s)
//     plus Gaussian noise (offpolicy.NoisySampler);
//   - assembler and replay: one-step transitions, uniform replay;
//   - learner: TD critic, deterministic policy gradient, Polyak targets
//     (Learner).
func Pieces(h algo.Header, c algo.Config, sp algo.Spaces) (*algo.Pieces, error) {
	cfg, err := algo.ConfigAs[*Config]("ddpg", c, h)
	if err != nil {
		return nil, err
	}
	p, err := newPieces(h, cfg, sp)
	if err != nil {
		return nil, fmt.Errorf("%w: ddpg: %w", algo.ErrConfig, err)
	}
	return offpolicy.NewPieces(p.Policy, p.Sampler, p.Assembler, p.Replay, p.newLearner), nil
}

// pieces are the shared actor pieces plus DDPG's config.
type pieces struct {
	*offpolicy.ActorPieces
	cfg *Config
}

func newPieces(h algo.Header, cfg *Config, sp algo.Spaces) (*pieces, error) {
	ap, err := offpolicy.NewActorPieces(h, sp)
	if err != nil {
		return nil, err
	}
	ap.LearningStarts, ap.BufferSize, ap.Gamma, ap.Sigma = cfg.LearningStarts, cfg.BufferSize, cfg.Gamma, cfg.ExplorationNoise
	p := &pieces{ActorPieces: ap, cfg: cfg}
	ap.NewAgent = p.newAgent
	return p, nil
}

// newAgent builds the networks with the run's initial weights (stream
// "ddpg/init"), as every piece that holds one does.
func (p *pieces) newAgent() (*Agent, error) {
	return newAgent(p.ObsDim, p.Low, p.High, p.cfg.NetArch, rng.New(p.H.Seed, "ddpg/init", 0))
}

// Learner is DDPG's learner (algo.TransitionLearner): actor, critic,
// their targets and two Adams, drawing minibatches with the stream
// "ddpg/replay"; the schedule, Grad and Apply are offpolicy.DPG's.
type Learner struct {
	offpolicy.DPG
	p         *pieces
	agent     *Agent
	qf1       *nn.Critic
	qf1Target *nn.Critic
	sampleSrc *rand.PCG // the minibatch stream's source, which a checkpoint saves
	nextAct   []float32
	nextQ     []float32
	// par runs the target networks' forward pass beside the critic's
	// (bit-identical to one after the other: they share only the batch);
	// nil with parallel: false.
	par     *twin.Pair
	qn      []float32 // Q'(s', μ'(s')), written by targetQ
	targetQ func()
}

func (p *pieces) newLearner() (*Learner, error) {
	cfg, B, actDim := p.cfg, p.cfg.BatchSize, len(p.Low)
	agent, err := p.newAgent()
	if err != nil {
		return nil, err
	}
	l := &Learner{p: p, agent: agent, qf1: agent.QF[0], qf1Target: agent.QF[0].Clone(),
		nextAct: make([]float32, B*actDim),
		nextQ:   make([]float32, B)} // y = r + γ(1 − d) Q'(s', μ'(s'))
	l.DPG = offpolicy.DPG{Name: "ddpg", Actor: agent.Actor, TargetActor: agent.Actor.Clone(), Head: agent.Head,
		Q1: agent.QF[0], QParams: agent.QF[0].Params(), BatchSize: B, LearningStarts: cfg.LearningStarts,
		PolicyFrequency: cfg.PolicyFrequency, Tau: cfg.Tau, Scalars: Scalars, CriticGrad: l.criticGrad,
		DQ: make([]float32, B), Pi: make([]float32, B*actDim), DOut: make([]float32, B*actDim)}
	l.Targets = [][2][]*nn.Param{{l.TargetActor.Params(), l.Actor.Params()}, {l.qf1Target.Params(), l.qf1.Params()}}
	l.SetSlot(0)
	if l.QOpt, err = nn.NewAdam(nn.AdamConfig{LR: float32(cfg.LearningRate)}); err != nil {
		return nil, err
	}
	if l.ActorOpt, err = nn.NewAdam(nn.AdamConfig{LR: float32(cfg.LearningRate)}); err != nil {
		return nil, err
	}
	for _, net := range []*nn.Critic{l.qf1, l.qf1Target} {
		net.Net.Reserve(B)
	}
	l.Actor.Reserve(B)
	l.TargetActor.Reserve(B)
	l.par = twin.NewIf(cfg.Parallel)
	l.targetQ = func() {
		mb, B := &l.Mb, l.p.cfg.BatchSize
		l.Head.ActionTo(l.nextAct, l.TargetActor.Forward(mb.NextObs, B))
		l.qn = l.qf1Target.Forward(mb.NextObs, l.nextAct, B)
	}
	return l, nil
}

// Close stops the helper goroutine (parallel: true); the learner stays
// usable on the caller's goroutine.
func (l *Learner) Close() error {
	l.par.Close()
	return nil
}

// Model returns the agent the learner trains (to save and evaluate).
func (l *Learner) Model() algo.Model { return l.agent }

// Learn takes the updates due in (prev, step] (offpolicy.DPG.LearnWith).
func (l *Learner) Learn(ctx context.Context, rb algo.Replay, prev, step int64) ([]algo.Stat, error) {
	return l.LearnWith(ctx, l, rb, prev, step)
}

// criticGrad sets the critic's gradients of the TD loss (Lillicrap et
// al. 2016, Algorithm 1): MSE(Q(s, a), r + γ^m (1 − d)·Q'(s', μ'(s'))),
// and appends the critic's scalars to dst (Scalars' order).
func (l *Learner) criticGrad(dst []float64) []float64 {
	mb, B := &l.Mb, l.p.cfg.BatchSize
	l.par.Go(l.targetQ)
	l.qf1.ZeroGrad()
	q := l.qf1.Forward(mb.Obs, mb.Actions, B)
	l.par.Wait()
	qn := l.qn
	for i := range B {
		l.nextQ[i] = mb.Rewards[i] + mb.Discounts[i]*(1-mb.Dones[i])*qn[i]
	}
	loss := nn.MSE(l.DQ, q, l.nextQ)
	qMean := offpolicy.Mean(q)
	l.qf1.Backward(l.DQ)
	return append(dst, qMean, float64(loss))
}

var _ algo.SplitLearner = (*Learner)(nil)

// SetSlot makes the learner draw minibatches from ("ddpg/replay", i).
func (l *Learner) SetSlot(i int) {
	l.sampleSrc = rng.Source(l.p.H.Seed, "ddpg/replay", i)
	l.SampleRNG = rand.New(l.sampleSrc)
}

// LearnerState is what a checkpoint saves of the learner
// (offpolicy.StateLearner): the networks and their targets, both Adams,
// the minibatch stream, the counts (the update count is the
// policy_frequency phase) and the actor's last loss (logged until the
// next actor step).
func (l *Learner) LearnerState() offpolicy.LearnerState {
	return offpolicy.LearnerState{Params: l.stateParams(),
		Opts:    []offpolicy.OptState{{Opt: l.QOpt, Params: l.qf1.Params()}, {Opt: l.ActorOpt, Params: l.Actor.Params()}},
		Streams: []*rand.PCG{l.sampleSrc}, Values: []any{&l.Updates, &l.Counts, &l.ActorLoss}}
}

func (l *Learner) stateParams() []*nn.Param {
	return offpolicy.Concat(l.Actor.Params(), l.TargetActor.Params(), l.qf1.Params(), l.qf1Target.Params())
}

// State is the actor, the critic and their targets.
func (l *Learner) State() *weights.Version { return weights.New(uint64(l.Updates), l.stateParams()) }

// SetState copies s into the networks.
func (l *Learner) SetState(s *weights.Version) error { return l.SetStateOf(s, l.stateParams()) }
