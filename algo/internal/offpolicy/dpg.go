package offpolicy

import (
	"context"
	"fmt"
	"math/rand/v2"

	"herd/algo"
	"herd/nn"
	"herd/weights"
)

// DPG is the learner DDPG and TD3 share (embedded in theirs): a
// deterministic actor with its target, critics updated every update, and
// every PolicyFrequency-th update a second phase that takes the
// deterministic policy gradient through Q1 and the Polyak update of all
// targets. The algorithm supplies its critic loss (CriticGrad) and its
// target pairs; DPG holds the schedule, the two-phase Grad, Apply and
// the counts.
type DPG struct {
	Name                                       string // in errors
	Actor, TargetActor                         *nn.MLP
	Head                                       *nn.TanhActor
	Q1                                         *nn.Critic       // the critic the actor climbs
	QParams                                    []*nn.Param      // every critic's parameters: gradient part 0
	Targets                                    [][2][]*nn.Param // (target, online) pairs for the Polyak update
	QOpt, ActorOpt                             *nn.Adam
	SampleRNG                                  *rand.Rand // the minibatch stream
	BatchSize, LearningStarts, PolicyFrequency int
	Tau                                        float64
	// Scalars are the metrics columns, the critic's first and
	// losses/actor_loss last; CriticGrad returns the critic's values in
	// their order.
	Scalars []string
	// CriticGrad sets QParams' gradients of the critic loss on Mb and
	// appends the critic's scalars to dst.
	CriticGrad func(dst []float64) []float64

	Counts            algo.UpdateCounts // optimizer and target steps taken
	Updates           int64
	ActorLoss         float64
	Mb                algo.Minibatch
	Pi, DOut, DQ      []float32
	stats, learnStats []algo.Stat
	vals              []float64 // CriticGrad's scalars
	// Learn's ticket list and gradient buffer.
	tickets []algo.Ticket
	g       *algo.Grad
	// drawn is the update whose minibatch Mb holds (0: none): an update's
	// later phases reuse its phase 0's.
	drawn uint64
}

// Weights returns the actor's parameters as version = critic updates so
// far.
func (d *DPG) Weights() *weights.Version { return weights.New(uint64(d.Updates), d.Actor.Params()) }

// UpdateCounts returns the optimizer steps and target updates taken so far.
func (d *DPG) UpdateCounts() algo.UpdateCounts { return d.Counts }

// nq is the number of the critic's scalars.
func (d *DPG) nq() int { return len(d.Scalars) - 1 }

// LearnWith takes one update for each env step in (prev, step] once
// learning has started (step > learning_starts and rb holds a batch): a
// critic update, and every policy_frequency critic updates one actor
// update and one Polyak update of all targets. Each update is l's Grad
// then Apply, phase by phase (Learn): the update several learners take.
func (d *DPG) LearnWith(ctx context.Context, l algo.SplitLearner, rb algo.Replay, prev, step int64) ([]algo.Stat, error) {
	if d.g == nil {
		d.g = d.NewGrad()
	}
	stats, ts, actor, err := Learn(ctx, l, rb, d.tickets, d.g, prev, step, uint64(d.Updates)+1)
	d.tickets = ts
	if err != nil || len(ts) == 0 {
		return nil, err
	}
	// The scalars of the last update, and the actor's loss when one of the
	// call's updates moved the actor.
	d.learnStats = append(d.learnStats[:0], stats[:d.nq()]...)
	if actor {
		d.learnStats = append(d.learnStats, algo.Stat{Name: "losses/actor_loss", Value: d.ActorLoss})
	}
	return d.learnStats, nil
}

// Due appends one ticket per env step in (max(prev, learning_starts),
// step]: Learn's schedule.
func (d *DPG) Due(dst []algo.Ticket, rb algo.Replay, prev, step int64, next uint64) []algo.Ticket {
	if step <= int64(d.LearningStarts) || rb.Len() < d.BatchSize {
		return dst
	}
	return StepTickets(dst, prev, step, int64(d.LearningStarts), next)
}

// NewGrad sizes a gradient of the critics and the actor.
func (d *DPG) NewGrad() *algo.Grad { return NewGrad(len(d.Scalars), d.QParams, d.Actor.Params()) }

// Phases is 2 for every policy_frequency-th update (the critic step, then
// the actor's at the critics it left), else 1 (algo.Phaser).
func (d *DPG) Phases(t algo.Ticket) int {
	if t.Index%uint64(d.PolicyFrequency) == 0 {
		return 2
	}
	return 1
}

// Grad computes phase t.Phase of update t into g. Phase 0 draws the
// minibatch and takes the critic loss's gradient (CriticGrad); phase 1
// (every policy_frequency-th update, see Phases) the actor's
// deterministic policy gradient through Q1 on the same minibatch, at the
// parameters phase 0's apply left, and asks for the Polyak update of all
// targets.
func (d *DPG) Grad(ctx context.Context, rb algo.Replay, t algo.Ticket, g *algo.Grad) error {
	if err := CheckGrad(g, 2); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	StartGrad(g, t)
	switch {
	case t.Phase == 0:
		if err := rb.Sample(&d.Mb, d.BatchSize, t.Step, d.SampleRNG); err != nil {
			d.drawn = 0
			return fmt.Errorf("%s: sample: %w", d.Name, err)
		}
		d.drawn = t.Index
		g.Stats = g.Stats[:0]
		d.vals = d.CriticGrad(d.vals[:0])
		for i, v := range d.vals {
			g.Stats = append(g.Stats, algo.Stat{Name: d.Scalars[i], Value: v})
		}
		GradOut(g.Parts[0], d.QParams)
		g.Has[0] = 1
		g.Stats = append(g.Stats, algo.Stat{Name: "losses/actor_loss"})
	case t.Phase == 1 && d.Phases(t) == 2 && d.drawn == t.Index && t.Index > 0:
		// −E[Q(s, μ(s))] (Silver et al. 2014), through the critic's dQ/da.
		actorLoss := DPGGrad(d.Actor, d.Head, d.Q1, d.Mb.Obs, d.BatchSize, d.Pi, d.DOut, d.DQ)
		GradOut(g.Parts[1], d.Actor.Params())
		g.Has[1], g.Targets = 1, 1
		g.Stats = g.Stats[:0]
		for _, name := range d.Scalars[:d.nq()] {
			g.Stats = append(g.Stats, algo.Stat{Name: name})
		}
		g.Stats = append(g.Stats, algo.Stat{Name: "losses/actor_loss", Value: actorLoss})
	default:
		return fmt.Errorf("%s: phase %d of update %d (of %d phases) without its phase 0 on this learner", d.Name, t.Phase, t.Index, d.Phases(t))
	}
	return nil
}

// Apply takes the critic step when g carries the critics' gradient (phase
// 0, which counts the update), the actor step and the Polyak update of all
// targets when it carries the actor's.
func (d *DPG) Apply(g *algo.Grad) ([]algo.Stat, error) {
	if err := CheckGrad(g, 2); err != nil {
		return nil, err
	}
	nq := d.nq()
	if len(g.Stats) < nq+1 {
		return nil, fmt.Errorf("%w: %s: %d scalars, want %d", algo.ErrGradShape, d.Name, len(g.Stats), nq+1)
	}
	if g.Has[0] > 0 {
		if err := GradIn(d.QParams, g.Parts[0]); err != nil {
			return nil, err
		}
		d.QOpt.Step(d.QParams)
		d.Counts.Critic++
		d.stats = append(d.stats[:0], g.Stats[:nq]...)
	}
	if g.Phase == 0 {
		d.Updates += int64(g.N)
	}
	if n := g.Has[1]; n > 0 {
		if err := GradIn(d.Actor.Params(), g.Parts[1]); err != nil {
			return nil, err
		}
		d.ActorOpt.Step(d.Actor.Params())
		d.Counts.Actor++
		d.ActorLoss = g.Stats[nq].Value * float64(g.N) / float64(n)
		d.stats = append(d.stats[:min(nq, len(d.stats))], algo.Stat{Name: "losses/actor_loss", Value: d.ActorLoss})
	}
	if g.Targets > 0 {
		d.Counts.Target++
		if err := PolyakAll(d.Tau, d.Targets...); err != nil {
			return nil, err
		}
	}
	return d.stats, nil
}

// SetStateOf copies s into ps, the learner's state parameters, and takes
// its update count.
func (d *DPG) SetStateOf(s *weights.Version, ps []*nn.Param) error {
	if err := s.CopyTo(ps); err != nil {
		return fmt.Errorf("%s: %w", d.Name, err)
	}
	d.Updates = int64(s.N)
	return nil
}

// DPGAgent holds DDPG's and TD3's networks: the deterministic actor
// μ(s) = tanh(f(s))·scale + bias and the critics Q1 (TD3: and Q2). As a
// policy it acts with μ.
type DPGAgent struct {
	Actor *nn.MLP
	Head  *nn.TanhActor
	QF    []*nn.Critic
	name  string // the algorithm, in the saved file's metadata
}

// NewDPGAgent builds algorithm name's actor, then its critics, drawing
// their initial weights from r.
func NewDPGAgent(name string, critics, obsDim int, low, high []float32, arch []int, r *rand.Rand) (*DPGAgent, error) {
	head, err := nn.NewTanhActor(low, high)
	if err != nil {
		return nil, err
	}
	actDim := len(low)
	actor, err := nn.NewMLP(nn.MLPConfig{In: obsDim, Hidden: arch, Out: actDim, Act: nn.ReLU}, r)
	if err != nil {
		return nil, err
	}
	qf, err := NewCritics(critics, obsDim, actDim, arch, r)
	if err != nil {
		return nil, err
	}
	return &DPGAgent{Actor: actor, Head: head, QF: qf, name: name}, nil
}

// Act writes μ(s) into dst.
func (a *DPGAgent) Act(dst, obs []float32) []float32 {
	return a.Head.ActionTo(dst, a.Actor.Forward(obs, 1))
}

// Nets names the actor and the critics as Save writes them (actor., qf1.,
// qf2.).
func (a *DPGAgent) Nets() []Named {
	nets := []Named{{Prefix: "actor", Params: a.Actor.Params()}}
	for i, q := range a.QF {
		nets = append(nets, Named{Prefix: fmt.Sprintf("qf%d", i+1), Params: q.Params()})
	}
	return nets
}

// Params returns the parameters Save writes (algo.ParamModel).
func (a *DPGAgent) Params() []*nn.Param { return Params(a.Nets()) }

// Save writes the actor and the critics to path (safetensors, prefixed as
// Nets names them).
func (a *DPGAgent) Save(path string) error {
	return Save(path, a.Nets(), map[string]string{"algo": a.name})
}
