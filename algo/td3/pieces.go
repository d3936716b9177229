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
	ap.NewActor = func() (*nn.MLP, *nn.TanhActor, error) {
		a, err := p.newAgent()
		if err != nil {
			return nil, nil, err
		}
		return a.Actor, a.Head, nil
	}
	return p, nil
}

// newAgent builds the networks with the run's initial weights (stream
// "td3/init"), as every piece that holds one does.
func (p *pieces) newAgent() (*Agent, error) {
	return newAgent(p.ObsDim, p.Low, p.High, p.cfg.NetArch, rng.New(p.H.Seed, "td3/init", 0))
}

// Learner is TD3's learner (algo.TransitionLearner): actor, twin critics,
// their targets and two Adams, with the streams "td3/learner" (smoothing
// noise) and "td3/replay" (minibatches).
type Learner struct {
	counts                       algo.UpdateCounts // optimizer and target steps taken
	p                            *pieces
	agent                        *Agent
	actor, targetActor           *nn.MLP
	head                         *nn.TanhActor
	qf1Target, qf2Target         *nn.Critic
	qParams                      []*nn.Param
	qOpt, actorOpt               *nn.Adam
	learnRNG, sampleRNG          *rand.Rand
	learnSrc, sampleSrc          *rand.PCG // their sources, which a checkpoint saves
	par                          *twin.Pair
	critics, targets             *offpolicy.Twin
	updates                      int64
	mb                           algo.Minibatch
	nextAct, nextQ, dQ, pi, dOut []float32
	actorLoss                    float64
	stats, learnStats            []algo.Stat
	// Learn's ticket list and gradient buffer.
	tickets []algo.Ticket
	g       *algo.Grad
	// drawn is the update whose minibatch mb holds (0: none): an update's
	// later phases reuse its phase 0's.
	drawn uint64
}

func (p *pieces) newLearner() (*Learner, error) {
	cfg, B, actDim := p.cfg, p.cfg.BatchSize, len(p.Low)
	agent, err := p.newAgent()
	if err != nil {
		return nil, err
	}
	l := &Learner{p: p, agent: agent, actor: agent.Actor, targetActor: agent.Actor.Clone(), head: agent.Head,
		qf1Target: agent.QF1.Clone(), qf2Target: agent.QF2.Clone(),
		qParams: append(slices.Clone(agent.QF1.Params()), agent.QF2.Params()...),
		nextAct: make([]float32, B*actDim),
		nextQ:   make([]float32, B), // y = r + γ(1 − d) min_i Q'_i(s', μ'(s') + clip(ε))
		dQ:      make([]float32, B), pi: make([]float32, B*actDim), dOut: make([]float32, B*actDim)}
	l.SetSlot(0)
	if l.qOpt, err = nn.NewAdam(nn.AdamConfig{LR: float32(cfg.LearningRate)}); err != nil {
		return nil, err
	}
	if l.actorOpt, err = nn.NewAdam(nn.AdamConfig{LR: float32(cfg.LearningRate)}); err != nil {
		return nil, err
	}
	for _, net := range []*nn.Critic{agent.QF1, agent.QF2, l.qf1Target, l.qf2Target} {
		net.Net.Reserve(B)
	}
	l.actor.Reserve(B)
	l.targetActor.Reserve(B)
	// The twin critics run side by side on two goroutines (bit-identical
	// to one after the other: see offpolicy.Twin).
	l.par = twin.NewIf(cfg.Parallel)
	l.critics = offpolicy.NewTwin(agent.QF1, agent.QF2, l.par, B)
	l.targets = offpolicy.NewTwin(l.qf1Target, l.qf2Target, l.par, B)
	return l, nil
}

// Close stops the helper goroutine.
func (l *Learner) Close() error { l.par.Close(); return nil }

// Model returns the agent the learner trains (to save and evaluate).
func (l *Learner) Model() algo.Model { return l.agent }

// Weights returns the actor's parameters as version = critic updates so
// far.
func (l *Learner) Weights() *weights.Version { return weights.New(uint64(l.updates), l.actor.Params()) }

// Learn takes one update for each env step in (prev, step] once learning
// has started (step > learning_starts and rb holds a batch): a critic
// update, and every policy_frequency critic updates one actor update and
// one Polyak update of all targets. Each update is Grad then Apply on the
// learner itself, phase by phase (offpolicy.Learn): the update several
// learners take.
func (l *Learner) Learn(ctx context.Context, rb algo.Replay, prev, step int64) ([]algo.Stat, error) {
	if l.g == nil {
		l.g = l.NewGrad()
	}
	stats, ts, actor, err := offpolicy.Learn(ctx, l, rb, l.tickets, l.g, prev, step, uint64(l.updates)+1)
	l.tickets = ts
	if err != nil || len(ts) == 0 {
		return nil, err
	}
	// The scalars of the last update, and the actor's loss when one of the
	// call's updates moved the actor.
	l.learnStats = append(l.learnStats[:0], stats[:3]...)
	if actor {
		l.learnStats = append(l.learnStats, algo.Stat{Name: "losses/actor_loss", Value: l.actorLoss})
	}
	return l.learnStats, nil
}

// criticTarget computes the clipped double-Q target y into nextQ.
func (l *Learner) criticTarget() {
	cfg, mb, B, actDim := l.p.cfg, &l.mb, l.p.cfg.BatchSize, len(l.p.Low)
	low, high := l.p.Low, l.p.High
	// Target policy smoothing (Fujimoto et al. 2018, eq. 14):
	// ã = clip(μ'(s') + clip(ε, −c, c)·scale, low, high), ε ~ N(0, σ²).
	l.head.ActionTo(l.nextAct, l.targetActor.Forward(mb.NextObs, B))
	for i := range l.nextAct {
		j := i % actDim
		eps := clamp(l.learnRNG.NormFloat64()*cfg.PolicyNoise, -cfg.NoiseClip, cfg.NoiseClip)
		l.nextAct[i] = clamp32(l.nextAct[i]+float32(eps)*l.head.Scale[j], low[j], high[j])
	}
	q1n, q2n := l.targets.Forward(mb.NextObs, l.nextAct, B)
	for i := range B {
		l.nextQ[i] = mb.Rewards[i] + mb.Discounts[i]*(1-mb.Dones[i])*min(q1n[i], q2n[i])
	}
}

// UpdateCounts returns the optimizer steps and target updates taken so far.
func (l *Learner) UpdateCounts() algo.UpdateCounts { return l.counts }

var _ algo.SplitLearner = (*Learner)(nil)

// SetSlot makes the learner draw from ("td3/learner", i) and
// ("td3/replay", i).
func (l *Learner) SetSlot(i int) {
	l.learnSrc, l.sampleSrc = rng.Source(l.p.H.Seed, "td3/learner", i), rng.Source(l.p.H.Seed, "td3/replay", i)
	l.learnRNG, l.sampleRNG = rand.New(l.learnSrc), rand.New(l.sampleSrc)
}

// Due appends one ticket per env step in (max(prev, learning_starts),
// step]: Learn's schedule.
func (l *Learner) Due(dst []algo.Ticket, rb algo.Replay, prev, step int64, next uint64) []algo.Ticket {
	cfg := l.p.cfg
	if step <= int64(cfg.LearningStarts) || rb.Len() < cfg.BatchSize {
		return dst
	}
	return offpolicy.StepTickets(dst, prev, step, int64(cfg.LearningStarts), next)
}

// LearnerState is what a checkpoint saves of the learner
// (offpolicy.StateLearner): the networks and their targets, both Adams,
// both streams, the counts (the update count is the policy_frequency
// phase) and the actor's last loss (logged until the next actor step).
func (l *Learner) LearnerState() offpolicy.LearnerState {
	return offpolicy.LearnerState{Params: l.stateParams(),
		Opts:    []offpolicy.OptState{{Opt: l.qOpt, Params: l.qParams}, {Opt: l.actorOpt, Params: l.actor.Params()}},
		Streams: []*rand.PCG{l.learnSrc, l.sampleSrc}, Values: []any{&l.updates, &l.counts, &l.actorLoss}}
}

func (l *Learner) stateParams() []*nn.Param {
	return offpolicy.Concat(l.actor.Params(), l.targetActor.Params(), l.qParams, l.qf1Target.Params(), l.qf2Target.Params())
}

// State is the actor, both critics and the three targets.
func (l *Learner) State() *weights.Version { return weights.New(uint64(l.updates), l.stateParams()) }

// SetState copies s into the networks.
func (l *Learner) SetState(s *weights.Version) error {
	if err := s.CopyTo(l.stateParams()); err != nil {
		return fmt.Errorf("td3: %w", err)
	}
	l.updates = int64(s.N)
	return nil
}

// NewGrad sizes a gradient of the critics and the actor.
func (l *Learner) NewGrad() *algo.Grad { return offpolicy.NewGrad(4, l.qParams, l.actor.Params()) }

// Phases is 2 for every policy_frequency-th update (the critic step, then
// the actor's at the critics it left, as Fujimoto et al. 2018, Algorithm
// 1), else 1 (algo.Phaser).
func (l *Learner) Phases(t algo.Ticket) int {
	if t.Index%uint64(l.p.cfg.PolicyFrequency) == 0 {
		return 2
	}
	return 1
}

// Grad computes phase t.Phase of update t into g. Phase 0 draws the
// minibatch and takes the clipped double-Q loss's gradient; phase 1 (every
// policy_frequency-th update, see Phases) the actor's deterministic policy
// gradient through Q1 on the same minibatch, at the parameters phase 0's
// apply left, and asks for the Polyak update of all targets.
func (l *Learner) Grad(ctx context.Context, rb algo.Replay, t algo.Ticket, g *algo.Grad) error {
	B := l.p.cfg.BatchSize
	if err := offpolicy.CheckGrad(g, 2); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	offpolicy.StartGrad(g, t)
	switch {
	case t.Phase == 0:
		if err := rb.Sample(&l.mb, B, t.Step, l.sampleRNG); err != nil {
			l.drawn = 0
			return fmt.Errorf("td3: sample: %w", err)
		}
		l.drawn = t.Index
		l.criticTarget()
		qfLoss, q1Mean, q2Mean := l.critics.FitGrad(l.mb.Obs, l.mb.Actions, l.nextQ, B)
		offpolicy.GradOut(g.Parts[0], l.qParams)
		g.Has[0] = 1
		g.Stats = append(g.Stats[:0], algo.Stat{Name: "losses/qf1_values", Value: q1Mean},
			algo.Stat{Name: "losses/qf2_values", Value: q2Mean}, algo.Stat{Name: "losses/qf_loss", Value: qfLoss / 2},
			algo.Stat{Name: "losses/actor_loss"})
	case t.Phase == 1 && l.Phases(t) == 2 && l.drawn == t.Index && t.Index > 0:
		actorLoss := offpolicy.DPGGrad(l.actor, l.head, l.agent.QF1, l.mb.Obs, B, l.pi, l.dOut, l.dQ)
		offpolicy.GradOut(g.Parts[1], l.actor.Params())
		g.Has[1], g.Targets = 1, 1
		g.Stats = append(g.Stats[:0], algo.Stat{Name: "losses/qf1_values"}, algo.Stat{Name: "losses/qf2_values"},
			algo.Stat{Name: "losses/qf_loss"}, algo.Stat{Name: "losses/actor_loss", Value: actorLoss})
	default:
		return fmt.Errorf("td3: phase %d of update %d (of %d phases) without its phase 0 on this learner", t.Phase, t.Index, l.Phases(t))
	}
	return nil
}

// Apply takes the critic step when g carries the critics' gradient (phase
// 0, which counts the update), the actor step and the Polyak update of all
// targets when it carries the actor's.
func (l *Learner) Apply(g *algo.Grad) ([]algo.Stat, error) {
	if err := offpolicy.CheckGrad(g, 2); err != nil {
		return nil, err
	}
	if len(g.Stats) < 4 {
		return nil, fmt.Errorf("%w: td3: %d scalars, want 4", algo.ErrGradShape, len(g.Stats))
	}
	if g.Has[0] > 0 {
		if err := offpolicy.GradIn(l.qParams, g.Parts[0]); err != nil {
			return nil, err
		}
		l.qOpt.Step(l.qParams)
		l.counts.Critic++
		l.stats = append(l.stats[:0], g.Stats[:3]...)
	}
	if g.Phase == 0 {
		l.updates += int64(g.N)
	}
	if n := g.Has[1]; n > 0 {
		if err := offpolicy.GradIn(l.actor.Params(), g.Parts[1]); err != nil {
			return nil, err
		}
		l.actorOpt.Step(l.actor.Params())
		l.counts.Actor++
		l.actorLoss = g.Stats[3].Value * float64(g.N) / float64(n)
		l.stats = append(l.stats[:min(3, len(l.stats))], algo.Stat{Name: "losses/actor_loss", Value: l.actorLoss})
	}
	if g.Targets > 0 {
		l.counts.Target++
		if err := offpolicy.PolyakAll(l.p.cfg.Tau,
			[2][]*nn.Param{l.targetActor.Params(), l.actor.Params()},
			[2][]*nn.Param{l.qf1Target.Params(), l.agent.QF1.Params()},
			[2][]*nn.Param{l.qf2Target.Params(), l.agent.QF2.Params()}); err != nil {
			return nil, err
		}
	}
	return l.stats, nil
}
