package onpolicy

import (
	"context"
	"fmt"

	"herd/algo"
	"herd/internal/rng"
	"herd/internal/scratch"
	"herd/nn"
	"herd/sample"
	"herd/weights"
)

// Learner is what the learners of PPO and A2C share: the Agent being
// trained and its optimizer, the advantage buffers and the version count.
// Each algorithm embeds it and writes its own Learn: Begin, then its
// update on Adv and Returns. Not safe for concurrent use.
type Learner struct {
	Agent *Agent
	Opt   nn.Optimizer
	// Adv and Returns are the segment's GAE advantages and the critic's
	// targets Adv + Values, filled by Begin (T·N each, time-major).
	Adv, Returns []float32
	// Iterations is the number of Learn calls the run plans (steps over
	// num_envs × num_steps), the horizon of learning-rate annealing.
	Iterations int

	// Delayed turns on HTS-RL's delayed gradient (Eq. 6): a segment
	// gathered one version behind the learner (seg.Version = n−1 while
	// the learner holds θ_n) has its gradients evaluated at the behaviour
	// parameters θ_{n−1} and applied to θ_n with θ_n's optimizer state;
	// see GoBehind.
	Delayed bool

	gamma, lambda float32
	n             uint64 // Learn calls so far: the version number

	// The delayed gradient's parameter copies, flat over Agent.Params():
	// start is θ_n as Begin found it, prev θ_{n−1} (the previous start),
	// cur a scratch copy. delayed: the current Learn evaluates its
	// gradients behind (GoBehind).
	prev, start, cur []float32
	havePrev         bool
	delayed          bool
	lag              uint64

	// self is the algorithm's learner that embeds this one (set by
	// NewPieces), whose own state (LearnerState) SaveLearner saves too.
	self algo.SegmentLearner
}

// NewLearner builds the learner of algorithm name for a run on spaces sp:
// the agent from the stream (h.Seed, name+"/init", 0), as NewPieces' policy,
// and opt.
func NewLearner(name string, h algo.Header, sp algo.Spaces, cfg AgentConfig, opt nn.Optimizer, iterations int, gamma, lambda float32) (*Learner, error) {
	agent, err := NewAgent(sp.Obs, sp.Act, withRows(cfg, sp.Rows), rng.New(h.Seed, name+"/init", 0))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &Learner{Agent: agent, Opt: opt, Iterations: iterations, gamma: gamma, lambda: lambda}, nil
}

// Begin starts one Learn call on seg: it checks that seg fits the agent
// (an error, never a panic, for a bad segment from another process),
// counts the call and computes Adv and Returns with GAE(γ, λ). It returns
// the iteration number, 1 for the first call.
func (l *Learner) Begin(ctx context.Context, seg *sample.Segment) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := seg.Check(); err != nil {
		return 0, err
	}
	a := l.Agent
	if seg.ObsDim != a.ObsDim || seg.ActDim != a.ActDim || seg.T < 1 || seg.N < 1 {
		return 0, fmt.Errorf("%w: segment %d×%d with obs %d, actions %d; the agent has obs %d, actions %d",
			sample.ErrShape, seg.T, seg.N, seg.ObsDim, seg.ActDim, a.ObsDim, a.ActDim)
	}
	if a.NActions > 0 {
		for k, v := range seg.Actions {
			if !(v >= 0 && v < float32(a.NActions)) || v != float32(int(v)) {
				return 0, fmt.Errorf("%w: segment action %d is %v, not an index below %d", sample.ErrShape, k, v, a.NActions)
			}
		}
	}
	l.keep(seg.Version)
	tn := seg.T * seg.N
	l.Adv, l.Returns = scratch.Resize(l.Adv, tn), scratch.Resize(l.Returns, tn)
	GAE(l.Adv, seg.Rewards, seg.Values, seg.Dones, seg.LastValues, seg.N, l.gamma, l.lambda)
	ReturnsTo(l.Returns, l.Adv, seg.Values)
	if a.RNorm != nil {
		// Raw rewards and values, divided by the scale: the advantages
		// of normalized rewards (RewardNorm).
		inv := 1 / a.RNorm.Scale()
		for i := range l.Adv {
			l.Adv[i] *= inv
		}
	}
	l.n++
	return int(l.n), nil
}

// Fold folds seg into the normalization statistics (AgentConfig.NormObs,
// NormReward) after the update that learned from it, so that the update
// saw the segment as the acting weights did.
func (l *Learner) Fold(seg *sample.Segment) {
	a := l.Agent
	if a.ObsNorm != nil {
		a.ObsNorm.Update(seg.Obs, seg.T*seg.N)
	}
	if a.RNorm != nil {
		a.RNorm.Update(seg, l.gamma)
	}
}

// keep records θ_n (the parameters as this Learn call finds them) and
// decides whether the call evaluates its gradients behind: with Delayed,
// when the segment was gathered with θ_{n−1}, whose copy the previous call
// kept.
func (l *Learner) keep(version uint64) {
	l.lag = l.n - min(version, l.n)
	l.delayed = false
	if !l.Delayed {
		return
	}
	if l.start != nil {
		l.prev, l.start = l.start, l.prev
		l.havePrev = true
	}
	params := l.Agent.Params()
	l.start = flatten(l.start, params)
	l.delayed = l.havePrev && l.lag == 1
}

// Lag is how many versions the current Learn call's segment is behind the
// learner (0 under the local executor, 1 under HTS from the second
// segment on).
func (l *Learner) Lag() uint64 { return l.lag }

// Behind reports whether the current Learn call evaluates its gradients at
// the behaviour parameters (Delayed and a lag of exactly one version).
func (l *Learner) Behind() bool { return l.delayed }

// GoBehind moves the parameters to the point where HTS-RL's delayed
// gradient (Eq. 6) evaluates the gradients, and ComeBack moves them back
// bit for bit: the caller computes its gradients in between, then clips
// and applies them to the parameters with its optimizer. With Behind the
// point is θ_{n−1} + (θ − θ_n), where θ is the parameters now and θ_n
// what they were at Begin — θ_{n−1} itself, bit for bit, for the first
// gradient of an update (A2C's only one); for the later minibatches of a
// PPO update, the behaviour parameters moved by the steps taken so far.
// Otherwise both do nothing and the gradients are evaluated at θ.
func (l *Learner) GoBehind() {
	if !l.delayed {
		return
	}
	params := l.Agent.Params()
	l.cur = flatten(l.cur, params)
	off := 0
	for _, p := range params {
		m := len(p.Value)
		if l.Agent.isStats(p) {
			off += m // statistics, not weights: the current ones
			continue
		}
		prev, start, cur := l.prev[off:off+m], l.start[off:off+m], l.cur[off:off+m]
		for i := range p.Value {
			p.Value[i] = prev[i] + (cur[i] - start[i])
		}
		off += m
	}
}

// ComeBack undoes GoBehind.
func (l *Learner) ComeBack() {
	if !l.delayed {
		return
	}
	off := 0
	for _, p := range l.Agent.Params() {
		off += copy(p.Value, l.cur[off:off+len(p.Value)])
	}
}

// flatten copies the values of params into dst (grown as needed).
func flatten(dst []float32, params []*nn.Param) []float32 {
	n := 0
	for _, p := range params {
		n += len(p.Value)
	}
	dst = scratch.Resize(dst, n)
	off := 0
	for _, p := range params {
		off += copy(dst[off:], p.Value)
	}
	return dst
}

// Step applies the optimizer to the agent's parameters, on the caller: an
// optimizer step split across the twin's two cores reads gradients the
// other core just wrote, which costs more than it saves.
func (l *Learner) Step() { l.Opt.Step(l.Agent.Params()) }

// Weights returns the current parameters as version n, the number of
// Learn calls so far (0 before the first).
func (l *Learner) Weights() *weights.Version { return weights.New(l.n, l.Agent.Params()) }

// Model is the trained agent (algo.Model: Act and Save).
func (l *Learner) Model() algo.Model { return l.Agent }

// base lets TrainLocal find the Learner inside an algorithm's learner.
func (l *Learner) base() *Learner { return l }

// Close stops the agent's parallel worker (AgentConfig.Parallel); the
// learner stays usable on the caller's goroutine.
func (l *Learner) Close() error {
	l.Agent.Close()
	return nil
}

// NewOptimizer is A2C's and IMPALA's optimizer: RMSprop with α = 0.99 (the
// A2C/A3C and IMPALA papers) or Adam, both with step size lr and ε eps.
func NewOptimizer(rmsprop bool, lr, eps float32) (nn.Optimizer, error) {
	if rmsprop {
		return nn.NewRMSProp(nn.RMSPropConfig{LR: lr, Alpha: 0.99, Eps: eps})
	}
	return nn.NewAdam(nn.AdamConfig{LR: lr, Eps: eps})
}
