package dqn

import (
	"context"
	"fmt"
	"math/rand/v2"

	"herd/algo"
	"herd/algo/internal/offpolicy"
	"herd/env"
	"herd/internal/rng"
	"herd/internal/twin"
	"herd/nn"
	"herd/weights"
)

// Pieces cuts DQN into the pieces executors place (algo.Pieces):
//   - policy: Q(s, ·; θ), one output per action (offpolicy.MLPPolicy);
//   - sampler: ε-greedy on those outputs with ε at the current step;
//   - assembler: n-step transitions per env (offpolicy.Assembler);
//   - replay: uniform or prioritized (offpolicy.Replay);
//   - learner: TD updates, target network, priorities (Learner);
//   - prioritizer (initial_priorities: actor only): Ape-X initial
//     priorities from the env worker's Q-network copy.
func Pieces(h algo.Header, c algo.Config, sp algo.Spaces) (*algo.Pieces, error) {
	cfg, err := algo.ConfigAs[*Config]("dqn", c, h)
	if err != nil {
		return nil, err
	}
	p, err := newPieces(h, cfg, sp)
	if err != nil {
		return nil, err
	}
	ps := offpolicy.NewPieces(p.newPolicy, p.newSampler, p.newAssembler, p.newReplay, p.newLearner)
	if cfg.InitialPriorities == PrioritiesActor {
		ps.NewPrioritizer = func() (algo.Prioritizer, error) { return p.newPrioritizer() }
	}
	return ps, nil
}

// pieces holds what every piece of one run needs to know.
type pieces struct {
	h                algo.Header
	cfg              *Config
	obsDim           int
	obs              env.Space
	actions          env.Discrete
	explorationSteps int
}

func newPieces(h algo.Header, cfg *Config, sp algo.Spaces) (*pieces, error) {
	d, ok := sp.Act.(env.Discrete)
	if !ok || sp.Obs == nil || sp.Obs.Dim() < 1 {
		return nil, fmt.Errorf("%w: dqn: action space %v; DQN needs a Discrete one", algo.ErrConfig, sp.Act)
	}
	if sp.Rows.Mask > 0 {
		return nil, fmt.Errorf("%w: dqn: the rows carry action masks (action_mask=true), which DQN does not honour; PPO, A2C and IMPALA do", algo.ErrConfig)
	}
	return &pieces{h: h, cfg: cfg, obsDim: sp.Obs.Dim(), obs: sp.Obs, actions: d,
		explorationSteps: int(cfg.ExplorationFraction * float64(h.Steps))}, nil
}

// newAgent builds the Q-network with the run's initial weights (stream
// "dqn/init"), as every piece that holds one does.
func (p *pieces) newAgent() (*Agent, error) {
	return newAgent(p.cfg, p.obs, p.actions.N, rng.New(p.h.Seed, "dqn/init", 0))
}

func (p *pieces) newPolicy() (*offpolicy.MLPPolicy, error) {
	a, err := p.newAgent()
	if err != nil {
		return nil, err
	}
	return &offpolicy.MLPPolicy{Net: a.q}, nil
}

func (p *pieces) newSampler(_ int, r *rand.Rand) (*sampler, error) {
	return &sampler{p: p, r: r, actorEps: -1}, nil
}

func (p *pieces) newAssembler(numEnvs int) (*offpolicy.Assembler, error) {
	return offpolicy.NewAssembler(numEnvs, p.cfg.NSteps, p.cfg.Gamma, p.obsDim, 1)
}

func (p *pieces) newReplay() (*offpolicy.Replay, error) {
	cfg := p.cfg
	rb, err := offpolicy.NewReplay(offpolicy.ReplayConfig{
		Capacity: cfg.BufferSize, ObsDim: p.obsDim, ActDim: 1, ObsEncoding: algo.ReplayObsEncoding(p.obs),
		NSteps: cfg.NSteps, Gamma: cfg.Gamma,
		Prioritized: cfg.Prioritized, Alpha: cfg.PriorityAlpha, Beta: cfg.PriorityBeta, Eps: cfg.PriorityEps,
		BetaSteps: p.h.Steps, Locking: p.h.Runtime.Locking(),
	})
	if err != nil {
		return nil, fmt.Errorf("dqn: replay: %w", err)
	}
	return rb, nil
}

// sampler is ε-greedy exploration (CleanRL dqn.py): per env, in row order,
// one uniform draw decides; below ε a uniformly random action, otherwise
// argmax_a Q(s, a). Computing Q for every row (rather than only for the
// exploiting ones, as the loop before the pieces did) changes no bits:
// rows are independent of their batch, and the draws are the same.
type sampler struct {
	p      *pieces
	r      *rand.Rand
	greedy [1]int
	// actorEps is Ape-X's fixed ε_i once SetActor ran with apex_epsilon
	// set; negative: the schedule.
	actorEps float64
}

// SetActor makes this actor i of n explore at Ape-X's ε_i when the config
// sets apex_epsilon (algo.ActorExplorer).
func (s *sampler) SetActor(i, n int) {
	if e := s.p.cfg.ApeXEpsilon; e > 0 {
		s.actorEps = algo.ApeXEpsilon(e, i, n)
	}
}

// SampleTo writes the actions for the n rows of Q-values out at step.
func (s *sampler) SampleTo(dst *algo.Acts, out []float32, n int, step int64) {
	cfg, k := s.p.cfg, s.p.actions.N
	offpolicy.SizeActs(dst, n, 1)
	eps := s.actorEps
	if eps < 0 {
		eps = offpolicy.LinearSchedule(cfg.StartE, cfg.EndE, s.p.explorationSteps, int(step))
	}
	for i := range n {
		if s.r.Float64() < eps {
			s.greedy[0] = s.r.IntN(k)
		} else {
			nn.ArgmaxTo(s.greedy[:], out[i*k:(i+1)*k], k)
		}
		dst.Actions[i] = float32(s.greedy[0])
		dst.EnvActions[i] = float32(s.greedy[0] + s.p.actions.Start)
	}
}

// Learner is DQN's learner (algo.TransitionLearner): the Q-network, its
// target network and the optimizer (Adam or RMSProp), drawing minibatches with the stream
// "dqn/replay".
type Learner struct {
	counts  algo.UpdateCounts // optimizer and target steps taken
	p       *pieces
	agent   *Agent
	q       qNet
	target  qNet
	opt     nn.Optimizer
	rng     *rand.Rand
	rngSrc  *rand.PCG // rng's source, which a checkpoint saves
	par     *twin.Pair
	updates uint64

	// Workspaces, sized once.
	mb        algo.Minibatch
	bActions  []int
	qPred     []float32 // Q(s, a; θ)
	targetMax []float32 // max_a' Q(s', a'; θ⁻), or Q(s', argmax_a' Q(s', a'; θ); θ⁻)
	nextAct   []int
	tdTarget  []float32
	tdErr     []float32
	dPred     []float32
	dQ        []float32
	qNext     []float32 // Q(s', ·; θ⁻), written by targetForward
	stats     [3]algo.Stat

	targetForward func()
}

func (p *pieces) newLearner() (*Learner, error) {
	cfg, B, k := p.cfg, p.cfg.BatchSize, p.actions.N
	agent, err := p.newAgent()
	if err != nil {
		return nil, err
	}
	opt, err := cfg.newOptimizer()
	if err != nil {
		return nil, err
	}
	src := rng.Source(p.h.Seed, "dqn/replay", 0)
	l := &Learner{p: p, agent: agent, q: agent.q, target: agent.q.clone(), opt: opt,
		rng: rand.New(src), rngSrc: src,
		// par runs the target network's forward pass beside the online
		// one's, so a training step uses both cores (results are identical
		// without it: see package twin), and the second layer's weight
		// gradients beside the rest of the backward pass (see doc.go).
		par:      twin.NewIf(cfg.Parallel),
		bActions: make([]int, B), qPred: make([]float32, B), targetMax: make([]float32, B),
		nextAct: make([]int, B), tdTarget: make([]float32, B), tdErr: make([]float32, B),
		dPred: make([]float32, B), dQ: make([]float32, B*k)}
	for _, n := range []qNet{l.q, l.target} {
		if m, ok := n.(mlpQ); ok {
			m.Reserve(B)
		}
	}
	l.targetForward = func() { l.qNext = l.target.Forward(l.mb.NextObs, B) }
	l.stats = [3]algo.Stat{{Name: "losses/td_loss"}, {Name: "losses/q_values"}, {Name: "charts/epsilon"}}
	return l, nil
}

// Agent is the learner's live Q-network as a greedy policy.
func (l *Learner) Agent() *Agent { return l.agent }

// Close stops the helper goroutine.
func (l *Learner) Close() error { l.par.Close(); return nil }

// Model returns the agent the learner trains (to save and evaluate).
func (l *Learner) Model() algo.Model { return l.agent }

// Weights returns the Q-network's parameters as version = updates so far.
func (l *Learner) Weights() *weights.Version { return weights.New(l.updates, l.q.Params()) }

// Learn trains once learning has started (step > learning_starts and rb
// holds a batch): gradient_steps gradient steps for each multiple of
// train_frequency in (prev, step], then one target update θ⁻ ← τθ + (1 −
// τ)θ⁻ for each multiple of target_network_frequency.
func (l *Learner) Learn(ctx context.Context, rb algo.Replay, prev, step int64) ([]algo.Stat, error) {
	cfg := l.p.cfg
	if step <= int64(cfg.LearningStarts) || rb.Len() < cfg.BatchSize {
		return nil, nil
	}
	// Env steps up to learning_starts train nothing, also when this call
	// covers steps on both sides of it.
	prev = max(prev, int64(cfg.LearningStarts))
	rounds := offpolicy.Crossings(prev, step, int64(cfg.TrainFrequency))
	for range rounds * int64(cfg.GradientSteps) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		loss, meanQ, err := l.train(rb, step)
		if err != nil {
			return nil, fmt.Errorf("dqn: train: %w", err)
		}
		l.stats[0].Value, l.stats[1].Value = loss, meanQ
	}
	if err := l.syncTargets(prev, step); err != nil {
		return nil, err
	}
	if rounds == 0 {
		return nil, nil
	}
	// ε of the step the last actions were chosen at.
	l.stats[2].Value = offpolicy.LinearSchedule(cfg.StartE, cfg.EndE, l.p.explorationSteps, int(prev))
	return l.stats[:], nil
}

// train runs one update on a sampled minibatch — grad, then apply — and
// returns the loss and the mean Q(s, a) of the batch.
func (l *Learner) train(rb algo.Replay, step int64) (loss, meanQ float64, err error) {
	if loss, meanQ, err = l.grad(rb, step); err != nil {
		return 0, 0, err
	}
	l.apply(step)
	l.updates++
	return loss, meanQ, nil
}

// grad samples a minibatch with l.rng, sets the Q-network's gradients of
// the TD loss and feeds the TD errors back as priorities; the parameters
// do not move.
func (l *Learner) grad(rb algo.Replay, step int64) (loss, meanQ float64, err error) {
	cfg, B, k := l.p.cfg, l.p.cfg.BatchSize, l.p.actions.N
	q, mb := l.q, &l.mb
	if err := rb.Sample(mb, B, step, l.rng); err != nil {
		return 0, 0, err
	}
	for i := range B {
		l.bActions[i] = int(mb.Actions[i])
	}
	// The TD target, without gradient through θ⁻: the target network's
	// forward runs on the worker while this goroutine runs the online
	// network's (they share only the read-only batch).
	l.par.Go(l.targetForward)
	if cfg.DoubleQ {
		nn.ArgmaxTo(l.nextAct, q.Forward(mb.NextObs, B), k)
	}
	l.predict(mb) // Q(s, a; θ), last, so its activations feed the backward pass
	l.par.Wait()
	if cfg.DoubleQ {
		nn.GatherTo(l.targetMax, l.qNext, k, l.nextAct)
	} else {
		nn.MaxTo(l.targetMax, l.qNext, k)
	}
	// y = r + γ^m (1 − terminated) max_a' Q(s', a'; θ⁻)
	for i := range B {
		l.tdTarget[i] = mb.Rewards[i] + mb.Discounts[i]*(1-mb.Dones[i])*l.targetMax[i]
	}
	lv := l.tdGradFromPred(mb, l.tdTarget)
	var sumQ float64
	for i := range B {
		l.tdErr[i] = l.qPred[i] - l.tdTarget[i]
		sumQ += float64(l.qPred[i])
	}
	// The priorities only steer later draws, so feeding them back before
	// the optimizer step (rather than after, as before the split) changes
	// no bits.
	if err := rb.UpdatePriorities(mb, l.tdErr); err != nil {
		return 0, 0, err
	}
	return float64(lv), sumQ / float64(B), nil
}

// apply takes the optimizer step with the Q-network's gradients, at the
// learning rate of step (anneal_lr), after clipping their norm.
func (l *Learner) apply(step int64) {
	cfg, h := l.p.cfg, l.p.h
	if cfg.AnnealLR {
		frac := 1 - float64(step)/float64(h.Steps)
		l.opt.SetLR(float32(frac * cfg.LearningRate))
	}
	if cfg.MaxGradNorm > 0 {
		nn.ClipGradNorm(l.q.Params(), float32(cfg.MaxGradNorm))
	}
	l.opt.Step(l.q.Params())
	l.counts.Critic++
}

// UpdateCounts returns the optimizer steps and target updates taken so far.
func (l *Learner) UpdateCounts() algo.UpdateCounts { return l.counts }

var _ algo.SplitLearner = (*Learner)(nil)

// SetSlot makes the learner draw minibatches from ("dqn/replay", i).
func (l *Learner) SetSlot(i int) {
	l.rngSrc = rng.Source(l.p.h.Seed, "dqn/replay", i)
	l.rng = rand.New(l.rngSrc)
}

// Due appends gradient_steps tickets per multiple of train_frequency in
// (max(prev, learning_starts), step], each at its multiple: Learn's
// schedule.
func (l *Learner) Due(dst []algo.Ticket, rb algo.Replay, prev, step int64, next uint64) []algo.Ticket {
	cfg := l.p.cfg
	if step <= int64(cfg.LearningStarts) || rb.Len() < cfg.BatchSize {
		return dst
	}
	f := int64(cfg.TrainFrequency)
	for c := (max(prev, int64(cfg.LearningStarts))/f + 1) * f; c <= step; c += f {
		for range cfg.GradientSteps {
			dst = append(dst, algo.Ticket{Step: c, Index: next})
			next++
		}
	}
	return dst
}

// LearnerState is what a checkpoint saves of the learner
// (offpolicy.StateLearner): the Q-network and its target, the optimizer,
// the minibatch stream, the update and target-update counts. ε and β are
// functions of the global step, which the loop saves.
func (l *Learner) LearnerState() offpolicy.LearnerState {
	return offpolicy.LearnerState{Params: l.stateParams(), Opts: []offpolicy.OptState{{Opt: l.opt, Params: l.q.Params()}},
		Streams: []*rand.PCG{l.rngSrc}, Values: []any{&l.updates, &l.counts}}
}

func (l *Learner) stateParams() []*nn.Param {
	return offpolicy.Concat(l.q.Params(), l.target.Params())
}

// State is the Q-network and its target network.
func (l *Learner) State() *weights.Version { return weights.New(l.updates, l.stateParams()) }

// SetState copies s into the Q-network and its target network.
func (l *Learner) SetState(s *weights.Version) error {
	if err := s.CopyTo(l.stateParams()); err != nil {
		return fmt.Errorf("dqn: %w", err)
	}
	l.updates = s.N
	return nil
}

// NewGrad sizes a gradient of the Q-network.
func (l *Learner) NewGrad() *algo.Grad { return offpolicy.NewGrad(len(l.stats), l.q.Params()) }

// Grad computes update t's gradient into g (see algo.SplitLearner).
func (l *Learner) Grad(ctx context.Context, rb algo.Replay, t algo.Ticket, g *algo.Grad) error {
	if err := offpolicy.CheckGrad(g, 1); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	offpolicy.StartGrad(g, t)
	loss, meanQ, err := l.grad(rb, t.Step)
	if err != nil {
		return fmt.Errorf("dqn: train: %w", err)
	}
	offpolicy.GradOut(g.Parts[0], l.q.Params())
	g.Has[0] = 1
	cfg := l.p.cfg
	g.Stats = append(g.Stats[:0], algo.Stat{Name: "losses/td_loss", Value: loss}, algo.Stat{Name: "losses/q_values", Value: meanQ},
		algo.Stat{Name: "charts/epsilon", Value: offpolicy.LinearSchedule(cfg.StartE, cfg.EndE, l.p.explorationSteps, int(t.Step))})
	return nil
}

// Apply takes the optimizer step with g. The target updates are keyed to
// env steps, not to updates: Advance takes them.
func (l *Learner) Apply(g *algo.Grad) ([]algo.Stat, error) {
	if err := offpolicy.CheckGrad(g, 1); err != nil {
		return nil, err
	}
	if err := offpolicy.GradIn(l.q.Params(), g.Parts[0]); err != nil {
		return nil, err
	}
	l.apply(g.Step)
	l.updates += uint64(g.N)
	return g.Stats, nil
}

// Advance takes the target updates Learn takes over env steps (prev,
// step] — one per multiple of target_network_frequency once learning has
// started — after the updates Due handed out for them are applied (see
// algo.Advancer). Keyed to env steps, the syncs are Learn's also when
// target_network_frequency is not a multiple of train_frequency.
func (l *Learner) Advance(rb algo.Replay, prev, step int64) error {
	cfg := l.p.cfg
	if step <= int64(cfg.LearningStarts) || rb.Len() < cfg.BatchSize {
		return nil
	}
	return l.syncTargets(max(prev, int64(cfg.LearningStarts)), step)
}

// syncTargets takes a target update θ⁻ ← τθ + (1 − τ)θ⁻ for each multiple
// of target_network_frequency in (prev, step].
func (l *Learner) syncTargets(prev, step int64) error {
	for range offpolicy.Crossings(prev, step, int64(l.p.cfg.TargetNetworkFrequency)) {
		l.counts.Target++
		if err := nn.PolyakUpdate(l.target.Params(), l.q.Params(), float32(l.p.cfg.Tau)); err != nil {
			return fmt.Errorf("dqn: target update: %w", err)
		}
	}
	return nil
}

// tdGrad computes the TD loss of Q(s, a; θ) against the fixed targets y on
// mb — MSE or Huber, weighted by the importance weights under prioritized
// replay — and sets q's gradients to dL/dθ. It leaves Q(s, a; θ) in qPred.
func (l *Learner) tdGrad(mb *algo.Minibatch, y []float32) float32 {
	l.predict(mb)
	return l.tdGradFromPred(mb, y)
}

// predict runs the online network on mb's observations and keeps
// Q(s, a; θ) of the taken actions in qPred (train runs it beside the
// target network's forward pass on the twin worker).
func (l *Learner) predict(mb *algo.Minibatch) {
	B, k := l.p.cfg.BatchSize, l.p.actions.N
	nn.GatherTo(l.qPred, l.q.Forward(mb.Obs, B), k, l.bActions)
}

// tdGradFromPred is tdGrad after predict: the online network's last
// forward pass was on mb.Obs.
func (l *Learner) tdGradFromPred(mb *algo.Minibatch, y []float32) float32 {
	cfg, k := l.p.cfg, l.p.actions.N
	q := l.q
	w := mb.Weights
	if !cfg.Prioritized {
		w = nil // uniform replay: all weights are 1
	}
	var lv float32
	if cfg.Loss == "huber" {
		lv = nn.WeightedHuber(l.dPred, l.qPred, y, w, 1)
	} else {
		lv = nn.WeightedMSE(l.dPred, l.qPred, y, w)
	}
	nn.ScatterTo(l.dQ, k, l.bActions, l.dPred)
	q.ZeroGrad()
	q.backward(l.dQ, l.par) // MLP: the second layer's dW on the worker; no dL/d(obs)
	return lv
}
