package onpolicy

import (
	"fmt"
	"math/rand/v2"

	"herd/algo"
	"herd/algo/internal/encoder"
	"herd/env"
	"herd/internal/rng"
	"herd/internal/scratch"
	"herd/internal/twin"
	"herd/nn"
	"herd/weights"
)

// Policy is the policy piece of PPO and A2C (algo.PolicyNet): the actor and
// the critic forward, one output row per observation,
//
//	Discrete n actions:  [logit_1 … logit_n | V(s)]
//	Box of d dimensions: [μ_1 … μ_d | log σ_1 … log σ_d | V(s)]
//
// The Gaussian's state-independent log-std is repeated in every row, so
// that a Sampler needs nothing but the row. It holds an Agent built on the
// run's init stream, so version 0 equals the learner's initial weights.
type Policy struct {
	agent   *Agent
	version uint64
	live    *Learner // set by Follow: the parameters are the learner's own
	head    int      // width of the actor part of a row
	values  []float32
	actorIn []float32 // the actor's columns (AgentConfig.ActorObs)
	obsIn   []float32 // normalized observations (AgentConfig.NormObs)
	// state is a recurrent agent's state per env (rows of
	// Agent.StateDim), carried from one ForwardTo to the next: row r of
	// ForwardTo's observations is env r's.
	state []float32

	// par is the followed learner's worker (Follow, AgentConfig.Parallel):
	// a forward pass then runs the critic beside the actor, on the
	// operands below. actorFwd and criticFwd are bound once, so that it
	// does not allocate.
	par                 *twin.Pair
	fwdIn, fwdObs, out  []float32
	fwdN                int
	actorFwd, criticFwd func()
}

// NewPolicy builds the policy for spaces sp with cfg's networks, its
// initial weights drawn from r as NewAgent draws them. It never starts a
// goroutine (cfg.Parallel is ignored).
func NewPolicy(sp algo.Spaces, cfg AgentConfig, r *rand.Rand) (*Policy, error) {
	cfg.Parallel = false
	a, err := NewAgent(sp.Obs, sp.Act, withRows(cfg, sp.Rows), r)
	if err != nil {
		return nil, err
	}
	head := a.NActions
	if a.Gauss != nil {
		head = 2 * a.ActDim
	}
	p := &Policy{agent: a, head: head}
	p.actorFwd, p.criticFwd = p.forwardActor, p.forwardCritic
	return p, nil
}

// OutDim is the width of a row: the actor's part and the value.
func (p *Policy) OutDim() int { return p.head + 1 }

// Version is the number of the weights in use (0: the initial ones).
func (p *Policy) Version() uint64 {
	if p.live != nil {
		return p.live.n
	}
	return p.version
}

// Params lists the parameters a version must match (names, shapes), for
// weights.Decode.
func (p *Policy) Params() []*nn.Param { return p.agent.Params() }

// SetWeights makes the policy act with v. It does not copy: the policy's
// parameters point at v's values, which nothing writes (a version is
// immutable and a policy only reads its weights), so switching versions
// costs nothing per parameter.
func (p *Policy) SetWeights(v *weights.Version) error {
	src := make([]*nn.Param, v.Len())
	for i := range src {
		src[i] = v.Param(i)
	}
	if err := p.point(src, v.N); err != nil {
		return err
	}
	p.version, p.live, p.par = v.N, nil, nil
	return nil
}

// Follow makes the policy read l's live parameters, which change only
// inside l.Learn: the local executor's hand-off, where acting and learning
// take turns on one goroutine, so the next rollout acts with the newest
// weights without a snapshot per iteration (the copy cost A2C ~10% of its
// time). Version then reports l's number. SetWeights ends it.
//
// Taking turns, the policy may use the learner's worker as well
// (AgentConfig.Parallel): the critic's forward pass of a rollout step runs
// beside the actor's, on separate networks and buffers, so the rows are
// the same. A recurrent agent or a shared encoder keeps both on the
// caller.
func (p *Policy) Follow(l *Learner) error {
	if err := p.point(l.Agent.Params(), l.n); err != nil {
		return err
	}
	p.live = l
	if p.agent.trunk == nil && p.agent.StateDim() == 0 {
		p.par = l.Agent.par
	}
	return nil
}

// point makes the policy's parameters use the values of src (version n),
// after checking that they match.
func (p *Policy) point(src []*nn.Param, n uint64) error {
	ps := p.agent.Params()
	if len(src) != len(ps) {
		return fmt.Errorf("%w: version %d has %d tensors, the policy %d", weights.ErrMismatch, n, len(src), len(ps))
	}
	for i, q := range ps {
		s := src[i]
		if s.Name != q.Name || len(s.Value) != len(q.Value) || s.Transposed != q.Transposed {
			return fmt.Errorf("%w: version %d tensor %d is %q (%d values), the policy wants %q (%d values)",
				weights.ErrMismatch, n, i, s.Name, len(s.Value), q.Name, len(q.Value))
		}
	}
	for i, q := range ps {
		q.Value = src[i].Value
	}
	return nil
}

// ForwardTo writes the rows for n observations into dst[:n·OutDim()] and
// returns that slice. Row r depends only on observation r, and, for a
// recurrent agent, on env r's state, which it advances by one step.
func (p *Policy) ForwardTo(dst, obs []float32, n int) []float32 {
	if p.agent.StateDim() > 0 {
		return p.ForwardStateTo(dst, obs, p.envState(n), n)
	}
	return p.forward(dst, obs, n)
}

// ForwardStateTo is ForwardTo for n envs whose recurrent states the caller
// keeps (n rows of StateDim, advanced by one step in place): a policy
// worker serving envs whose states it holds apart from the network.
func (p *Policy) ForwardStateTo(dst, obs, state []float32, n int) []float32 {
	p.agent.SetSequences(1, n, state, nil)
	defer p.agent.finalStateTo(state)
	return p.forward(dst, obs, n)
}

// ValuesStateTo is ValuesTo for n envs whose states the caller keeps,
// which it reads and does not advance.
func (p *Policy) ValuesStateTo(dst, obs, state []float32, n int) []float32 {
	p.agent.SetSequences(1, n, state, nil)
	v := p.agent.critic.ForwardTo(dst[:n], p.agent.features(p.agent.ObsNorm.to(&p.obsIn, obs, n), n), n)
	p.agent.denormalize(v)
	return v
}

func (p *Policy) forward(dst, obs []float32, n int) []float32 {
	a, w := p.agent, p.OutDim()
	dst = dst[:n*w]
	p.fwdIn, p.fwdObs, p.fwdN = a.features(a.ObsNorm.to(&p.obsIn, obs, n), n), obs, n
	p.par.Do(p.actorFwd, p.criticFwd)
	out := p.out
	if a.Gauss == nil {
		for r := range n {
			copy(dst[r*w:r*w+p.head], out[r*p.head:(r+1)*p.head])
		}
	} else {
		d, logStd := a.ActDim, a.Gauss.LogStd.Value
		for r := range n {
			copy(dst[r*w:r*w+d], out[r*d:(r+1)*d])
			copy(dst[r*w+d:r*w+2*d], logStd)
		}
	}
	for r, v := range p.values {
		dst[r*w+p.head] = v
	}
	return dst
}

// forwardActor and forwardCritic are forward's two halves, on the
// operands it set.
func (p *Policy) forwardActor() {
	a := p.agent
	p.out = a.actor.Forward(a.actorInput(&p.actorIn, p.fwdIn, p.fwdN), p.fwdN)
	a.maskLogits(p.out, p.fwdObs, p.fwdN)
}

func (p *Policy) forwardCritic() {
	p.values = p.agent.critic.ForwardTo(scratch.Resize(p.values, p.fwdN), p.fwdIn, p.fwdN)
	p.agent.denormalize(p.values)
}

// ValuesTo writes V(s) for n observations into dst[:n] and returns it: the
// last column of ForwardTo's rows, bit for bit, at the cost of the critic
// alone (rollout.Segments' bootstraps).
//
// A recurrent agent reads each env's state without advancing it (the
// bootstrap of the observations after a segment's last step).
func (p *Policy) ValuesTo(dst, obs []float32, n int) []float32 {
	var state []float32
	if p.agent.StateDim() > 0 {
		state = p.envState(n)
	}
	return p.ValuesStateTo(dst, obs, state, n)
}

// envState returns the state of n envs, zero when the envs are new to
// the policy.
func (p *Policy) envState(n int) []float32 {
	if sd := p.agent.StateDim(); len(p.state) != n*sd {
		p.state = make([]float32, n*sd)
	}
	return p.state
}

// EnvValue is V(obs) of env i from its state, which it does not advance:
// the truncation bootstrap of env i's final observation
// (rollout.EnvValuer).
func (p *Policy) EnvValue(i int, obs []float32) float32 {
	a := p.agent
	var v [1]float32
	if sd := a.StateDim(); sd > 0 {
		a.SetSequences(1, 1, p.state[i*sd:(i+1)*sd], nil)
	}
	a.critic.ForwardTo(v[:], a.features(a.ObsNorm.to(&p.obsIn, obs, 1), 1), 1)
	a.denormalize(v[:])
	return v[0]
}

// ResetEnv zeroes env i's recurrent state: its episode ended, and its
// next observation begins another (CleanRL ppo_atari_lstm's (1 − done)·h).
func (p *Policy) ResetEnv(i int) {
	if sd := p.agent.StateDim(); sd > 0 && len(p.state) >= (i+1)*sd {
		clear(p.state[i*sd : (i+1)*sd])
	}
}

// StateTo appends the recurrent state of n envs (rows of StateDim; zero
// for envs new to the policy) to dst[:0] and returns it: the state a
// segment starts from (rollout.StateKeeper). Empty for an agent without a
// recurrent core.
func (p *Policy) StateTo(dst []float32, n int) []float32 {
	return append(dst[:0], p.envState(n)...)
}

// StateDim is the recurrent state of one env (0: none).
func (p *Policy) StateDim() int { return p.agent.StateDim() }

// SetState makes state (n rows of StateDim) the state of the n envs of
// the next ForwardTo (algo.StatefulPolicy): an executor that carries each
// env's state hands it in with the env's observations.
func (p *Policy) SetState(state []float32, n int) {
	copy(p.envState(n), state)
}

// Act writes the deterministic action for one observation (algo.Policy):
// the most likely discrete action, or the Gaussian mean clipped to the
// bounds.
func (p *Policy) Act(dst, obs []float32) []float32 { return p.agent.Act(dst, obs) }

// Sampler is the sampler piece of PPO and A2C (algo.Sampler): from a
// Policy's rows it draws the actions with its own stream, in row order —
// one uniform per row (Categorical, inverse CDF) or d normals per row
// (Gaussian) — and reads their log-probabilities and V(s). A row's draw
// therefore depends only on the row and on how many rows the stream has
// served, not on how the rows were batched.
type Sampler struct {
	r     *rand.Rand
	cat   nn.Categorical
	gauss *nn.DiagGaussian // state-dependent: reads log σ from the row
	sp    spaces
	head  []float32 // the actor part of the rows, n × head width
	idx   []int
}

// NewSampler returns the sampler for spaces sp drawing from r.
func NewSampler(sp algo.Spaces, r *rand.Rand) (*Sampler, error) {
	s, err := parseSpaces(sp.Obs, sp.Act)
	if err != nil {
		return nil, err
	}
	out := &Sampler{r: r, sp: s, cat: nn.Categorical{N: s.nActions}}
	if s.nActions == 0 {
		if out.gauss, err = nn.NewDiagGaussian(s.actDim, true, 0); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// SampleTo fills dst for the n rows of out (the step is not used: PPO and
// A2C have no exploration schedule).
func (s *Sampler) SampleTo(dst *algo.Acts, out []float32, n int, _ int64) {
	ad := s.sp.actDim
	hw := s.sp.nActions
	if s.gauss != nil {
		hw = 2 * ad
	}
	w := hw + 1
	dst.Actions, dst.EnvActions = scratch.Resize(dst.Actions, n*ad), scratch.Resize(dst.EnvActions, n*ad)
	dst.LogProbs, dst.Values = scratch.Resize(dst.LogProbs, n), scratch.Resize(dst.Values, n)
	s.head = scratch.Resize(s.head, n*hw)
	for r := range n {
		copy(s.head[r*hw:(r+1)*hw], out[r*w:r*w+hw])
		dst.Values[r] = out[r*w+hw]
	}
	if s.gauss != nil {
		s.gauss.SampleTo(dst.Actions, nil, s.head, s.r)
		s.gauss.LogProbTo(dst.LogProbs, s.head, dst.Actions)
		// Gymnasium's ClipAction, which CleanRL's continuous PPO applies:
		// the env gets the clipped action, the learner the raw sample.
		for k, v := range dst.Actions {
			j := k % ad
			dst.EnvActions[k] = min(max(v, s.sp.low[j]), s.sp.high[j])
		}
		return
	}
	if cap(s.idx) < n {
		s.idx = make([]int, n)
	}
	idx := s.idx[:n]
	s.cat.SampleLogProbTo(idx, dst.LogProbs, s.head, s.r)
	for k, v := range idx {
		dst.Actions[k] = float32(v)
		dst.EnvActions[k] = float32(v) + s.sp.start // indices are stored, values sent
	}
}

// spaces is what the pieces read off an env's spaces.
type spaces struct {
	obsDim, actDim int
	nActions       int       // Discrete: the number of actions; 0 for a Box
	start          float32   // Discrete: the first action's value
	low, high      []float32 // Box bounds
}

// parseSpaces accepts a flat Box of observations and a Discrete or flat Box
// action space.
func parseSpaces(obsSpace, actSpace env.Space) (spaces, error) {
	var s spaces
	obsBox, ok := obsSpace.(env.Box)
	if !ok {
		return s, fmt.Errorf("%w: observations %v: want a Box", ErrSpace, obsSpace)
	}
	s.obsDim = obsBox.Dim()
	switch a := actSpace.(type) {
	case env.Discrete:
		s.nActions, s.actDim, s.start = a.N, 1, float32(a.Start)
	case env.Box:
		if len(a.Shape()) != 1 {
			return s, fmt.Errorf("%w: actions %v: want a flat Box", ErrSpace, actSpace)
		}
		s.actDim, s.low, s.high = a.Dim(), a.Low, a.High
	default:
		return s, fmt.Errorf("%w: actions %v: want Discrete or a flat Box", ErrSpace, actSpace)
	}
	return s, nil
}

// checkObs reports observations the encoder cannot read: a convolutional
// encoder needs an image Box ([height, width, channels]); the MLP reads
// any Box as the flat vector of its values (row-major), as DQN's does.
func checkObs(obs env.Space, enc string) error {
	if encoder.IsConv(enc) {
		if _, _, _, err := encoder.ImageDims(obs); err != nil {
			return fmt.Errorf("%w: %w", ErrSpace, err)
		}
	}
	return nil
}

// NewPieces cuts an on-policy algorithm into its pieces for a run on spaces
// sp: the Policy (initial weights from the stream (seed, name+"/init", 0),
// as the learner draws them), the Sampler, and the algorithm's learner.
func NewPieces(name string, h algo.Header, sp algo.Spaces, cfg AgentConfig, newLearner func() (algo.SegmentLearner, error)) (*algo.Pieces, error) {
	newPolicy := func() (*Policy, error) { return NewPolicy(sp, cfg, rng.New(h.Seed, name+"/init", 0)) }
	if _, err := parseSpaces(sp.Obs, sp.Act); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if err := checkObs(sp.Obs, cfg.Encoder); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if err := CheckActorObs(cfg.ActorObs, sp.Rows); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &algo.Pieces{
		NewPolicy: func() (algo.PolicyNet, error) {
			p, err := newPolicy()
			if err != nil {
				return nil, err
			}
			return p, nil
		},
		NewSampler: func(_ int, r *rand.Rand) (algo.Sampler, error) { return NewSampler(sp, r) },
		NewSegmentLearner: func() (algo.SegmentLearner, error) {
			sl, err := newLearner()
			if b, ok := sl.(interface{ base() *Learner }); ok && err == nil {
				b.base().self = sl // SaveLearner reaches the algorithm's own state
			}
			return sl, err
		},
		DecodeWeights: func(b []byte) (*weights.Version, error) {
			p, err := newPolicy()
			if err != nil {
				return nil, err
			}
			return weights.Decode(b, p.Params())
		},
	}, nil
}

// CheckActorObs checks actor_obs against the env's rows: a decentralized
// actor with a centralized critic (MAPPO) needs rows that end in the
// global state (an id with state=true), and the actor must read exactly
// the agent's own part of a row (its observation and one-hot id), no
// more (the state would reach the actor) and no less (the actor would
// lose some of its own observation).
func CheckActorObs(actorObs int, rows env.RowLayout) error {
	switch {
	case actorObs == 0 && rows.State > 0:
		return fmt.Errorf("%w: the rows end in the global state (state=true), which the actor would read; set actor_obs: %d (the agent's own observation and id; a ppo setting) so that only the critic reads it, or drop state=true", ErrSpace, rows.Local())
	case actorObs == 0:
		return nil
	case rows.Agents == 0:
		return fmt.Errorf("%w: actor_obs %d needs a multi-agent env whose rows end in the global state (an id with state=true); with this env the actor would lose part of its observation", ErrSpace, actorObs)
	case rows.State == 0:
		return fmt.Errorf("%w: actor_obs %d without the global state: the env id has no state=true, so the critic reads what the actor reads (IPPO, not MAPPO); add state=true to the id, or drop actor_obs", ErrSpace, actorObs)
	case actorObs > rows.Local():
		return fmt.Errorf("%w: actor_obs %d reads %d values of the global state: an agent observes %d values of its row (its observation %d%s); set actor_obs: %d", ErrSpace, actorObs, actorObs-rows.Local(), rows.Local(), rows.Obs, idNote(rows), rows.Local())
	case actorObs < rows.Local():
		return fmt.Errorf("%w: actor_obs %d drops %d values of the agent's own part of the row (its observation %d%s); set actor_obs: %d", ErrSpace, actorObs, rows.Local()-actorObs, rows.Obs, idNote(rows), rows.Local())
	}
	return nil
}

func idNote(rows env.RowLayout) string {
	if rows.AgentID {
		return fmt.Sprintf(" + one-hot id %d", rows.Agents)
	}
	return ", no agent id"
}
