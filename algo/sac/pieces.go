package sac

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"herd/algo"
	"herd/algo/internal/offpolicy"
	"herd/env"
	"herd/internal/rng"
	"herd/internal/twin"
	"herd/nn"
	"herd/weights"
)

// Pieces cuts SAC into the pieces executors place (algo.Pieces):
//   - policy: the actor's raw outputs, the tanh-Gaussian parameters (μ and
//     the unsquashed log σ) of each row (offpolicy.MLPPolicy);
//   - sampler: uniformly random actions before learning starts, then a
//     sample tanh(μ + σε)·scale + bias;
//   - assembler: one-step transitions per env (offpolicy.Assembler);
//   - replay: uniform (offpolicy.Replay);
//   - learner: twin soft Q, actor and α updates, Polyak targets (Learner).
func Pieces(h algo.Header, c algo.Config, sp algo.Spaces) (*algo.Pieces, error) {
	cfg, err := algo.ConfigAs[*Config]("sac", c, h)
	if err != nil {
		return nil, err
	}
	p, err := newPieces(h, cfg, sp)
	if err != nil {
		return nil, fmt.Errorf("%w: sac: %w", algo.ErrConfig, err)
	}
	return offpolicy.NewPieces(p.newPolicy, p.newSampler, p.newAssembler, p.newReplay, p.newLearner), nil
}

// pieces holds what every piece of one run needs to know.
type pieces struct {
	h         algo.Header
	cfg       *Config
	sp        algo.Spaces
	obsDim    int
	low, high []float32
}

func newPieces(h algo.Header, cfg *Config, sp algo.Spaces) (*pieces, error) {
	low, high, err := offpolicy.BoxBounds(h.Env, sp.Act)
	if err != nil {
		return nil, err
	}
	if sp.Obs == nil || sp.Obs.Dim() < 1 {
		return nil, fmt.Errorf("observation space %v", sp.Obs)
	}
	return &pieces{h: h, cfg: cfg, sp: sp, obsDim: sp.Obs.Dim(), low: low, high: high}, nil
}

// newAgent builds the networks with the run's initial weights (stream
// "sac/init"), as every piece that holds one does.
func (p *pieces) newAgent() (*Agent, error) {
	return newAgent(p.obsDim, p.low, p.high, p.cfg.NetArch, rng.New(p.h.Seed, "sac/init", 0))
}

func (p *pieces) newPolicy() (*offpolicy.MLPPolicy, error) {
	a, err := p.newAgent()
	if err != nil {
		return nil, err
	}
	return &offpolicy.MLPPolicy{Net: a.Actor}, nil
}

func (p *pieces) newSampler(_ int, r *rand.Rand) (*sampler, error) {
	head, err := nn.NewTanhGaussian(p.low, p.high)
	if err != nil {
		return nil, err
	}
	return &sampler{space: p.sp.Act, head: head, learningStarts: int64(p.cfg.LearningStarts), r: r}, nil
}

func (p *pieces) newAssembler(numEnvs int) (*offpolicy.Assembler, error) {
	return offpolicy.NewAssembler(numEnvs, 1, p.cfg.Gamma, p.obsDim, len(p.low))
}

func (p *pieces) newReplay() (*offpolicy.Replay, error) {
	rb, err := offpolicy.NewReplay(offpolicy.ReplayConfig{Capacity: p.cfg.BufferSize, ObsDim: p.obsDim,
		ObsEncoding: algo.ReplayObsEncoding(p.sp.Obs), ActDim: len(p.low), NSteps: 1, Gamma: p.cfg.Gamma, Locking: p.h.Runtime.Locking()})
	if err != nil {
		return nil, fmt.Errorf("sac: replay: %w", err)
	}
	return rb, nil
}

// sampler acts with SAC's stochastic policy: uniformly random actions
// until learning starts, then ã = tanh(μ + σε)·scale + bias, ε ~ N(0, I)
// drawn row by row.
type sampler struct {
	space          env.Space
	head           *nn.TanhGaussian
	learningStarts int64
	r              *rand.Rand
}

// SampleTo writes the actions for the n rows of actor outputs out.
func (s *sampler) SampleTo(dst *algo.Acts, out []float32, n int, step int64) {
	d := s.head.Dim
	offpolicy.SizeActs(dst, n, d)
	if step < s.learningStarts {
		offpolicy.RandomActionsTo(dst.Actions, s.space, n, d, s.r)
	} else {
		s.head.SampleTo(dst.Actions, nil, nil, out[:n*2*d], s.r)
	}
	copy(dst.EnvActions, dst.Actions)
}

// Learner is SAC's learner (algo.TransitionLearner): actor, twin critics
// and their targets, three Adams and log α, with the streams "sac/learner"
// (policy samples inside updates) and "sac/replay" (minibatches).
type Learner struct {
	counts               algo.UpdateCounts // optimizer and target steps taken
	p                    *pieces
	agent                *Agent
	actor                *nn.MLP
	head                 *nn.TanhGaussian
	qf1Target, qf2Target *nn.Critic
	qParams              []*nn.Param
	qOpt, actorOpt, aOpt *nn.Adam
	logAlpha             *nn.Param
	alpha                float64
	targetEntropy        float64
	learnRNG, sampleRNG  *rand.Rand
	learnSrc, sampleSrc  *rand.PCG // their sources, which a checkpoint saves
	par                  *twin.Pair
	critics, targets     *offpolicy.Twin
	updates              uint64

	// Workspaces.
	mb         algo.Minibatch
	nextAct    []float32
	nextLogPi  []float32
	nextQ      []float32 // y = r + γ(1 − d)(min Q'(s', a') − α log π(a'|s'))
	pi         []float32
	logPi      []float32
	noise      []float32
	dQ1, dQ2   []float32
	dAct       []float32
	dLogPi     []float32
	dOut       []float32
	actorLoss  float64
	alphaLoss  float64
	actorSteps int
	stats      []algo.Stat
	qStats     []algo.Stat // the critics' scalars of the last critic step
	// Learn's ticket list and gradient buffer.
	tickets []algo.Ticket
	g       *algo.Grad
	// drawn is the update whose minibatch mb holds (0: none): an update's
	// later phases reuse its phase 0's.
	drawn uint64
}

func (p *pieces) newLearner() (*Learner, error) {
	cfg, B := p.cfg, p.cfg.BatchSize
	agent, err := p.newAgent()
	if err != nil {
		return nil, err
	}
	actDim := len(p.low)
	l := &Learner{p: p, agent: agent, actor: agent.Actor, head: agent.Head,
		qf1Target: agent.QF1.Clone(), qf2Target: agent.QF2.Clone(),
		qParams: append(slices.Clone(agent.QF1.Params()), agent.QF2.Params()...),
		// Automatic entropy tuning: learn log α towards H̄ = −dim(A).
		targetEntropy: -float64(actDim),
		logAlpha:      nn.NewParam("log_alpha", 1), // α starts at 1, as in CleanRL
		alpha:         cfg.Alpha,
		nextAct:       make([]float32, B*actDim), nextLogPi: make([]float32, B), nextQ: make([]float32, B),
		pi: make([]float32, B*actDim), logPi: make([]float32, B), noise: make([]float32, B*actDim),
		dQ1: make([]float32, B), dQ2: make([]float32, B), dAct: make([]float32, B*actDim),
		dLogPi: make([]float32, B), dOut: make([]float32, B*agent.Head.OutDim())}
	l.SetSlot(0)
	if l.qOpt, err = nn.NewAdam(nn.AdamConfig{LR: float32(cfg.QLR)}); err != nil {
		return nil, err
	}
	if l.actorOpt, err = nn.NewAdam(nn.AdamConfig{LR: float32(cfg.PolicyLR)}); err != nil {
		return nil, err
	}
	if cfg.Autotune {
		l.alpha = 1
		if l.aOpt, err = nn.NewAdam(nn.AdamConfig{LR: float32(cfg.QLR)}); err != nil {
			return nil, err
		}
	}
	for _, net := range []*nn.Critic{agent.QF1, agent.QF2, l.qf1Target, l.qf2Target} {
		net.Net.Reserve(B)
	}
	l.actor.Reserve(B)
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

// Weights returns the actor's parameters as version = updates so far.
func (l *Learner) Weights() *weights.Version { return weights.New(l.updates, l.actor.Params()) }

// Learn takes one update for each env step in (prev, step] once learning
// has started (step > learning_starts and rb holds a batch): a minibatch,
// a critic step, every policy_frequency steps as many actor (and α)
// steps, every target_network_frequency steps a Polyak update. Each update
// is Grad then Apply on the learner itself, phase by phase
// (offpolicy.Learn): the update several learners take.
func (l *Learner) Learn(ctx context.Context, rb algo.Replay, prev, step int64) ([]algo.Stat, error) {
	if l.g == nil {
		l.g = l.NewGrad()
	}
	stats, ts, _, err := offpolicy.Learn(ctx, l, rb, l.tickets, l.g, prev, step, l.updates+1)
	l.tickets = ts
	if err != nil || len(ts) == 0 {
		return nil, err
	}
	return stats, nil
}

// criticTarget computes the soft target into nextQ, without gradient
// (Haarnoja et al. 2018, eq. 3):
//
//	y = r + γ^m (1 − d)(min_i Q'_i(s', ã') − α log π(ã'|s')),  ã' ~ π(·|s').
func (l *Learner) criticTarget() {
	mb, B := &l.mb, l.p.cfg.BatchSize
	l.head.SampleTo(l.nextAct, l.nextLogPi, nil, l.actor.Forward(mb.NextObs, B), l.learnRNG)
	q1n, q2n := l.targets.Forward(mb.NextObs, l.nextAct, B)
	for i := range B {
		minQ := min(q1n[i], q2n[i]) - float32(l.alpha)*l.nextLogPi[i]
		l.nextQ[i] = mb.Rewards[i] + mb.Discounts[i]*(1-mb.Dones[i])*minQ
	}
}

// actorGrad sets the actor's gradients for
//
//	L = E[α log π(ã|s) − min_i Q_i(s, ã)],  ã = tanh(μ + σε)·scale + bias,
//
// reparameterised with ε from learnRNG, and returns L. dL/dQ_i = −1/B on
// the rows where critic i gives the minimum; dL/dã flows back through both
// critics (adding into their gradients, which are zeroed before their next
// step) and the sample (TanhGaussian.BackwardSample) into dOut.
func (l *Learner) actorGrad() float64 {
	mb, B, alpha := &l.mb, l.p.cfg.BatchSize, l.alpha
	out := l.actor.Forward(mb.Obs, B)
	l.head.SampleTo(l.pi, l.logPi, l.noise, out, l.learnRNG)
	q1, q2 := l.critics.Forward(mb.Obs, l.pi, B)
	var loss float64
	for i := range B {
		l.dQ1[i], l.dQ2[i] = 0, 0
		m := q1[i]
		if q2[i] < q1[i] {
			m = q2[i]
			l.dQ2[i] = -1 / float32(B)
		} else {
			l.dQ1[i] = -1 / float32(B)
		}
		loss += alpha*float64(l.logPi[i]) - float64(m)
		l.dLogPi[i] = float32(alpha) / float32(B)
	}
	g1, g2 := l.critics.Backward(l.dQ1, l.dQ2)
	copy(l.dAct, g1)
	for i, g := range g2 {
		l.dAct[i] += g
	}
	l.head.BackwardSample(l.dOut, out, l.noise, l.dAct, l.dLogPi)
	l.actor.ZeroGrad()
	l.actor.Backward(l.dOut)
	return loss / float64(B)
}

// alphaGrad sets the gradient of the entropy loss L(log α) = −α·E[log π +
// H̄] (CleanRL's form), with log π from the actor step's sample (taken
// before the actor moved; Stable-Baselines3's order), and returns L.
func (l *Learner) alphaGrad() float64 {
	B := l.p.cfg.BatchSize
	var s float64
	for i := range B {
		s += float64(l.logPi[i]) + l.targetEntropy
	}
	s /= float64(B)
	a := math.Exp(float64(l.logAlpha.Value[0]))
	l.logAlpha.Grad[0] = float32(-a * s)
	return -a * s
}

// UpdateCounts returns the optimizer steps and target updates taken so far.
func (l *Learner) UpdateCounts() algo.UpdateCounts { return l.counts }

var _ algo.SplitLearner = (*Learner)(nil)

// SetSlot makes the learner draw from ("sac/learner", i) and
// ("sac/replay", i).
func (l *Learner) SetSlot(i int) {
	l.learnSrc, l.sampleSrc = rng.Source(l.p.h.Seed, "sac/learner", i), rng.Source(l.p.h.Seed, "sac/replay", i)
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
// (offpolicy.StateLearner): the networks, targets and log α, the three
// Adams, both streams, the counts, α and the actor's last losses (logged
// until the next actor step).
func (l *Learner) LearnerState() offpolicy.LearnerState {
	opts := []offpolicy.OptState{{Opt: l.qOpt, Params: l.qParams}, {Opt: l.actorOpt, Params: l.actor.Params()}}
	if l.aOpt != nil {
		opts = append(opts, offpolicy.OptState{Opt: l.aOpt, Params: []*nn.Param{l.logAlpha}})
	}
	return offpolicy.LearnerState{Params: l.stateParams(), Opts: opts, Streams: []*rand.PCG{l.learnSrc, l.sampleSrc},
		Values: []any{&l.updates, &l.counts, &l.alpha, &l.actorLoss, &l.alphaLoss, &l.actorSteps}}
}

func (l *Learner) stateParams() []*nn.Param {
	return offpolicy.Concat(l.actor.Params(), l.qParams, l.qf1Target.Params(), l.qf2Target.Params(), []*nn.Param{l.logAlpha})
}

// State is the actor, both critics, their targets and log α.
func (l *Learner) State() *weights.Version { return weights.New(l.updates, l.stateParams()) }

// SetState copies s into the networks and log α.
func (l *Learner) SetState(s *weights.Version) error {
	if err := s.CopyTo(l.stateParams()); err != nil {
		return fmt.Errorf("sac: %w", err)
	}
	if l.p.cfg.Autotune {
		l.alpha = math.Exp(float64(l.logAlpha.Value[0]))
	}
	l.updates = s.N
	return nil
}

// The parts of SAC's gradient, and its scalars.
const (
	partCritics = iota
	partActor
	partAlpha
	statActorLoss = 3
	statAlphaLoss = 4
)

// NewGrad sizes a gradient of the critics, the actor and log α.
func (l *Learner) NewGrad() *algo.Grad {
	return offpolicy.NewGrad(5, l.qParams, l.actor.Params(), []*nn.Param{l.logAlpha})
}

// Phases is 1 + policy_frequency at a multiple of policy_frequency (the
// critic step, then policy_frequency actor and α steps, each at the
// parameters the one before left), else 1 (algo.Phaser).
func (l *Learner) Phases(t algo.Ticket) int {
	if pf := l.p.cfg.PolicyFrequency; t.Step%int64(pf) == 0 {
		return 1 + pf
	}
	return 1
}

// Grad computes phase t.Phase of update t into g. Phase 0 draws the
// minibatch and takes the twin soft Q loss's gradient; each later phase
// (see Phases) the actor's on the same minibatch with a fresh sample of
// the policy, and α's, at the parameters the previous phases' applies
// left. The last phase asks for the Polyak update when one is due.
func (l *Learner) Grad(ctx context.Context, rb algo.Replay, t algo.Ticket, g *algo.Grad) error {
	cfg, B := l.p.cfg, l.p.cfg.BatchSize
	if err := offpolicy.CheckGrad(g, 3); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	offpolicy.StartGrad(g, t)
	n := l.Phases(t)
	var qfLoss, q1Mean, q2Mean, actorLoss, alphaLoss float64
	switch {
	case t.Phase == 0:
		if err := rb.Sample(&l.mb, B, t.Step, l.sampleRNG); err != nil {
			l.drawn = 0
			return fmt.Errorf("sac: sample: %w", err)
		}
		l.drawn = t.Index
		l.criticTarget()
		qfLoss, q1Mean, q2Mean = l.critics.FitGrad(l.mb.Obs, l.mb.Actions, l.nextQ, B)
		offpolicy.GradOut(g.Parts[partCritics], l.qParams)
		g.Has[partCritics] = 1
	case t.Phase < n && l.drawn == t.Index && t.Index > 0:
		actorLoss = l.actorGrad()
		offpolicy.GradOut(g.Parts[partActor], l.actor.Params())
		g.Has[partActor] = 1
		if cfg.Autotune {
			alphaLoss = l.alphaGrad()
			g.Parts[partAlpha][0] = l.logAlpha.Grad[0]
			g.Has[partAlpha] = 1
		}
	default:
		return fmt.Errorf("sac: phase %d of update %d (of %d phases) without its phase 0 on this learner", t.Phase, t.Index, n)
	}
	if t.Phase == n-1 && t.Step%int64(cfg.TargetNetworkFrequency) == 0 {
		g.Targets = 1
	}
	g.Stats = append(g.Stats[:0], algo.Stat{Name: "losses/qf1_values", Value: q1Mean},
		algo.Stat{Name: "losses/qf2_values", Value: q2Mean}, algo.Stat{Name: "losses/qf_loss", Value: qfLoss / 2},
		algo.Stat{Name: "losses/actor_loss", Value: actorLoss}, algo.Stat{Name: "losses/alpha_loss", Value: alphaLoss})
	return nil
}

// Apply takes the critic step when g carries the critics' gradient (phase
// 0, which counts the update), one actor step and one α step when it
// carries theirs, then the Polyak update when one is due.
func (l *Learner) Apply(g *algo.Grad) ([]algo.Stat, error) {
	cfg := l.p.cfg
	if err := offpolicy.CheckGrad(g, 3); err != nil {
		return nil, err
	}
	if len(g.Stats) <= statAlphaLoss {
		return nil, fmt.Errorf("%w: sac: %d scalars, want %d", algo.ErrGradShape, len(g.Stats), statAlphaLoss+1)
	}
	if g.Has[partCritics] > 0 {
		if err := offpolicy.GradIn(l.qParams, g.Parts[partCritics]); err != nil {
			return nil, err
		}
		l.qOpt.Step(l.qParams)
		l.counts.Critic++
		l.qStats = append(l.qStats[:0], g.Stats[:3]...)
	}
	if g.Phase == 0 {
		l.updates += uint64(g.N)
	}
	if n := g.Has[partActor]; n > 0 {
		// The stats are means over all merged gradients; the losses are
		// those of the n that carry an actor part.
		scale := float64(g.N) / float64(n)
		l.actorLoss, l.alphaLoss = g.Stats[statActorLoss].Value*scale, g.Stats[statAlphaLoss].Value*scale
		if err := offpolicy.GradIn(l.actor.Params(), g.Parts[partActor]); err != nil {
			return nil, err
		}
		l.actorOpt.Step(l.actor.Params())
		l.actorSteps++
		l.counts.Actor++
		if cfg.Autotune && g.Has[partAlpha] > 0 {
			l.logAlpha.Grad[0] = g.Parts[partAlpha][0]
			l.aOpt.Step([]*nn.Param{l.logAlpha})
			l.alpha = math.Exp(float64(l.logAlpha.Value[0]))
		}
	}
	if g.Targets > 0 {
		l.counts.Target++
		if err := offpolicy.PolyakAll(cfg.Tau,
			[2][]*nn.Param{l.qf1Target.Params(), l.agent.QF1.Params()},
			[2][]*nn.Param{l.qf2Target.Params(), l.agent.QF2.Params()}); err != nil {
			return nil, err
		}
	}
	l.stats = append(l.stats[:0], l.qStats...)
	if l.actorSteps > 0 {
		l.stats = append(l.stats, algo.Stat{Name: "losses/actor_loss", Value: l.actorLoss},
			algo.Stat{Name: "losses/alpha", Value: l.alpha})
		if cfg.Autotune {
			l.stats = append(l.stats, algo.Stat{Name: "losses/alpha_loss", Value: l.alphaLoss})
		}
	}
	return l.stats, nil
}
