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
// "ddpg/init"), as every piece that holds one does.
func (p *pieces) newAgent() (*Agent, error) {
	return newAgent(p.ObsDim, p.Low, p.High, p.cfg.NetArch, rng.New(p.H.Seed, "ddpg/init", 0))
}

// Learner is DDPG's learner (algo.TransitionLearner): actor, critic,
// their targets and two Adams, drawing minibatches with the stream
// "ddpg/replay".
type Learner struct {
	counts                 algo.UpdateCounts // optimizer and target steps taken
	p                      *pieces
	agent                  *Agent
	actor, targetActor     *nn.MLP
	head                   *nn.TanhActor
	qf1, qf1Target         *nn.Critic
	qOpt, actorOpt         *nn.Adam
	sampleRNG              *rand.Rand
	sampleSrc              *rand.PCG // its source, which a checkpoint saves
	updates                int64
	mb                     algo.Minibatch
	nextAct, nextQ, dQ, pi []float32
	dOut                   []float32
	actorLoss              float64
	stats, learnStats      []algo.Stat
	// Learn's ticket list and gradient buffer.
	tickets []algo.Ticket
	g       *algo.Grad
	// drawn is the update whose minibatch mb holds (0: none): an update's
	// later phases reuse its phase 0's.
	drawn uint64
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
	l := &Learner{p: p, agent: agent, actor: agent.Actor, targetActor: agent.Actor.Clone(), head: agent.Head,
		qf1: agent.QF1, qf1Target: agent.QF1.Clone(),
		nextAct: make([]float32, B*actDim),
		nextQ:   make([]float32, B), // y = r + γ(1 − d) Q'(s', μ'(s'))
		dQ:      make([]float32, B), pi: make([]float32, B*actDim), dOut: make([]float32, B*actDim)}
	l.SetSlot(0)
	if l.qOpt, err = nn.NewAdam(nn.AdamConfig{LR: float32(cfg.LearningRate)}); err != nil {
		return nil, err
	}
	if l.actorOpt, err = nn.NewAdam(nn.AdamConfig{LR: float32(cfg.LearningRate)}); err != nil {
		return nil, err
	}
	for _, net := range []*nn.Critic{l.qf1, l.qf1Target} {
		net.Net.Reserve(B)
	}
	l.actor.Reserve(B)
	l.targetActor.Reserve(B)
	l.par = twin.NewIf(cfg.Parallel)
	l.targetQ = func() {
		mb, B := &l.mb, l.p.cfg.BatchSize
		l.head.ActionTo(l.nextAct, l.targetActor.Forward(mb.NextObs, B))
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

// Weights returns the actor's parameters as version = critic updates so
// far.
func (l *Learner) Weights() *weights.Version { return weights.New(uint64(l.updates), l.actor.Params()) }

// Learn takes one update for each env step in (prev, step] once learning
// has started (step > learning_starts and rb holds a batch): a critic
// update, and every policy_frequency critic updates one actor update and
// one Polyak update of both targets. Each update is Grad then Apply on the
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
	l.learnStats = append(l.learnStats[:0], stats[:2]...)
	if actor {
		l.learnStats = append(l.learnStats, algo.Stat{Name: "losses/actor_loss", Value: l.actorLoss})
	}
	return l.learnStats, nil
}

// criticGrad sets the critic's gradients of the TD loss (Lillicrap et
// al. 2016, Algorithm 1): MSE(Q(s, a), r + γ^m (1 − d)·Q'(s', μ'(s'))).
func (l *Learner) criticGrad() (qfLoss, qMean float64) {
	mb, B := &l.mb, l.p.cfg.BatchSize
	l.par.Go(l.targetQ)
	l.qf1.ZeroGrad()
	q := l.qf1.Forward(mb.Obs, mb.Actions, B)
	l.par.Wait()
	qn := l.qn
	for i := range B {
		l.nextQ[i] = mb.Rewards[i] + mb.Discounts[i]*(1-mb.Dones[i])*qn[i]
	}
	loss := nn.MSE(l.dQ, q, l.nextQ)
	qMean = offpolicy.Mean(q)
	l.qf1.Backward(l.dQ)
	return float64(loss), qMean
}

// UpdateCounts returns the optimizer steps and target updates taken so far.
func (l *Learner) UpdateCounts() algo.UpdateCounts { return l.counts }

var _ algo.SplitLearner = (*Learner)(nil)

// SetSlot makes the learner draw minibatches from ("ddpg/replay", i).
func (l *Learner) SetSlot(i int) {
	l.sampleSrc = rng.Source(l.p.H.Seed, "ddpg/replay", i)
	l.sampleRNG = rand.New(l.sampleSrc)
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
// the minibatch stream, the counts (the update count is the
// policy_frequency phase) and the actor's last loss (logged until the
// next actor step).
func (l *Learner) LearnerState() offpolicy.LearnerState {
	return offpolicy.LearnerState{Params: l.stateParams(),
		Opts:    []offpolicy.OptState{{Opt: l.qOpt, Params: l.qf1.Params()}, {Opt: l.actorOpt, Params: l.actor.Params()}},
		Streams: []*rand.PCG{l.sampleSrc}, Values: []any{&l.updates, &l.counts, &l.actorLoss}}
}

func (l *Learner) stateParams() []*nn.Param {
	return offpolicy.Concat(l.actor.Params(), l.targetActor.Params(), l.qf1.Params(), l.qf1Target.Params())
}

// State is the actor, the critic and their targets.
func (l *Learner) State() *weights.Version { return weights.New(uint64(l.updates), l.stateParams()) }

// SetState copies s into the networks.
func (l *Learner) SetState(s *weights.Version) error {
	if err := s.CopyTo(l.stateParams()); err != nil {
		return fmt.Errorf("ddpg: %w", err)
	}
	l.updates = int64(s.N)
	return nil
}

// NewGrad sizes a gradient of the critic and the actor.
func (l *Learner) NewGrad() *algo.Grad { return offpolicy.NewGrad(3, l.qf1.Params(), l.actor.Params()) }

// Phases is 2 for every policy_frequency-th update (the critic step, then
// the actor's at the critic it left, as Lillicrap et al. 2016, Algorithm
// 1), else 1 (algo.Phaser).
func (l *Learner) Phases(t algo.Ticket) int {
	if t.Index%uint64(l.p.cfg.PolicyFrequency) == 0 {
		return 2
	}
	return 1
}

// Grad computes phase t.Phase of update t into g. Phase 0 draws the
// minibatch and takes the TD loss's gradient; phase 1 (every
// policy_frequency-th update, see Phases) the deterministic policy
// gradient through the critic on the same minibatch, at the parameters
// phase 0's apply left, and asks for the Polyak update of both targets.
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
			return fmt.Errorf("ddpg: sample: %w", err)
		}
		l.drawn = t.Index
		qfLoss, qMean := l.criticGrad()
		offpolicy.GradOut(g.Parts[0], l.qf1.Params())
		g.Has[0] = 1
		g.Stats = append(g.Stats[:0], algo.Stat{Name: "losses/qf1_values", Value: qMean},
			algo.Stat{Name: "losses/qf1_loss", Value: qfLoss}, algo.Stat{Name: "losses/actor_loss"})
	case t.Phase == 1 && l.Phases(t) == 2 && l.drawn == t.Index && t.Index > 0:
		// −E[Q(s, μ(s))] (Silver et al. 2014), through the critic's dQ/da.
		actorLoss := offpolicy.DPGGrad(l.actor, l.head, l.qf1, l.mb.Obs, B, l.pi, l.dOut, l.dQ)
		offpolicy.GradOut(g.Parts[1], l.actor.Params())
		g.Has[1], g.Targets = 1, 1
		g.Stats = append(g.Stats[:0], algo.Stat{Name: "losses/qf1_values"}, algo.Stat{Name: "losses/qf1_loss"},
			algo.Stat{Name: "losses/actor_loss", Value: actorLoss})
	default:
		return fmt.Errorf("ddpg: phase %d of update %d (of %d phases) without its phase 0 on this learner", t.Phase, t.Index, l.Phases(t))
	}
	return nil
}

// Apply takes the critic step when g carries the critic's gradient (phase
// 0, which counts the update), the actor step and the Polyak update of
// both targets when it carries the actor's.
func (l *Learner) Apply(g *algo.Grad) ([]algo.Stat, error) {
	if err := offpolicy.CheckGrad(g, 2); err != nil {
		return nil, err
	}
	if len(g.Stats) < 3 {
		return nil, fmt.Errorf("%w: ddpg: %d scalars, want 3", algo.ErrGradShape, len(g.Stats))
	}
	if g.Has[0] > 0 {
		if err := offpolicy.GradIn(l.qf1.Params(), g.Parts[0]); err != nil {
			return nil, err
		}
		l.qOpt.Step(l.qf1.Params())
		l.counts.Critic++
		l.stats = append(l.stats[:0], g.Stats[:2]...)
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
		l.actorLoss = g.Stats[2].Value * float64(g.N) / float64(n)
		l.stats = append(l.stats[:min(2, len(l.stats))], algo.Stat{Name: "losses/actor_loss", Value: l.actorLoss})
	}
	if g.Targets > 0 {
		l.counts.Target++
		if err := offpolicy.PolyakAll(l.p.cfg.Tau,
			[2][]*nn.Param{l.targetActor.Params(), l.actor.Params()},
			[2][]*nn.Param{l.qf1Target.Params(), l.qf1.Params()}); err != nil {
			return nil, err
		}
	}
	return l.stats, nil
}
