package onpolicy

import (
	"errors"
	"fmt"
	"math/rand/v2"

	"herd/algo"
	"herd/algo/internal/encoder"
	"herd/env"
	"herd/internal/scratch"
	"herd/internal/twin"
	"herd/nn"
)

// ErrSpace is returned for an observation or action space the on-policy
// agents do not support (they take a flat Box of observations and a
// Discrete or flat Box action space).
var ErrSpace = errors.New("onpolicy: unsupported space")

// AgentConfig describes the networks of an actor-critic agent.
type AgentConfig struct {
	// Hidden are the hidden widths of both the actor and the critic
	// (separate networks, as in CleanRL's PPO and SB3's MlpPolicy).
	Hidden []int
	// Act is the hidden activation (CleanRL and SB3: tanh).
	Act nn.Activation
	// OrthoInit selects orthogonal init with gains √2 (hidden), 0.01
	// (policy output) and 1 (value output); otherwise PyTorch's default.
	OrthoInit bool
	// InitLogStd is the initial state-independent log-std of a Gaussian
	// policy (Box actions). CleanRL: 0.
	InitLogStd float32
	// Gemm is the matrix-multiply backend; nil = nn.DefaultGemm().
	Gemm nn.Gemm
	// ActorObs, when > 0, is how many leading values of an observation the
	// actor reads; the critic reads all of them. With rows that end in the
	// global state of a multi-agent env (env FlatOptions.State) this
	// is MAPPO: decentralized actors, a centralized critic. 0: all.
	ActorObs int
	// ValueNorm normalizes the critic's targets (MAPPO; ValueNorm).
	ValueNorm bool
	// InputNorm puts a LayerNorm of the input before the actor's and the
	// critic's first layer (MAPPO's feature normalization).
	InputNorm bool
	// MaskAt and MaskN locate a row's action mask (env
	// FlatOptions.ActionMask; set from the env's rows, see withRows):
	// MaskN values from column MaskAt, 0 marking an illegal action, whose
	// logit the policy replaces by maskedLogit (probability 0). MaskN 0:
	// no mask.
	MaskAt, MaskN int
	// Parallel computes the actor's and the critic's minibatch passes on
	// two goroutines (the Agent owns the second; Close stops it). Results
	// are identical either way.
	Parallel bool
	// Encoder is the networks' input stage (package encoder): "" or "mlp"
	// for a flat observation; "minatar" or "nature" give the actor and the
	// critic each the convolutions of that preset before their Hidden
	// ReLU layers (separate encoders; Act, OrthoInit, InputNorm and
	// ActorObs apply to the MLP only).
	Encoder string
	// SharedEncoder gives the actor and the critic one encoder: a
	// convolutional Encoder's convolutions and Hidden ReLU layers, named
	// "network.*", read by two linear heads, "actor" and "critic" (CleanRL's
	// ppo_atari.py Agent). Both heads' gradients add up in it.
	SharedEncoder bool
	// Recurrent, when "lstm" or "gru", puts a one-layer LSTM or GRU of
	// RecurrentHidden units between each network's encoder (its Hidden
	// layers, all activated) and its linear head: the actor and the
	// critic each have their own (SB3-contrib RecurrentPPO's
	// enable_critic_lstm). "" means none.
	Recurrent       string
	RecurrentHidden int
	// RecurrentAfter are hidden layers (activated) between the recurrent
	// core and the linear head of each network: SB3-contrib
	// RecurrentActorCriticPolicy's net_arch, which follows its LSTM.
	RecurrentAfter []int
	// NormObs normalizes observations where they enter the networks
	// (ObsNorm); NormReward scales the critic by the running std of the
	// discounted return (RewardNorm). SB3's VecNormalize.
	NormObs, NormReward bool
}

// body is what the agent needs of its actor and critic networks: the MLP
// of flat observations (net) and the convolutional network of images
// (encoder.Conv) both fit it.
type body interface {
	Params() []*nn.Param
	Reserve(batch int)
	Forward(x []float32, batch int) []float32
	ForwardTo(dst, x []float32, batch int) []float32
	Backward(dOut []float32)
}

// Agent is the actor-critic of CleanRL's ppo.py / ppo_continuous_action.py
// and SB3's A2C MlpPolicy: an actor MLP whose output parameterises a
// Categorical (Discrete actions: logits) or a diagonal Gaussian with a
// state-independent log-std (Box actions: means), and a separate critic MLP
// with one output, V(s).
//
// Actions are flat float32 rows of ActDim values: a Discrete action is one
// value holding the index, a Box action the raw (unclipped) Gaussian
// sample; the env receives it clipped to the bounds (EnvActionsTo).
//
// Parameters are named as PyTorch names CleanRL's Agent
// ("actor.0.weight", "critic.4.bias", "actor_logstd"), so a checkpoint
// loads into it.
//
// The learner's protocol is Evaluate (forward both networks on a minibatch,
// keeping the outputs) then Backward (accumulate dL/dθ from dL/dlog π,
// dL/dH and dL/dV). An Agent is not safe for concurrent use.
type Agent struct {
	actor, critic body
	// trunk is the shared encoder (AgentConfig.SharedEncoder), or nil; the
	// bodies are then its heads, read from x.
	trunk               *encoder.Conv
	actorHead, critHead *head
	x                   []float32 // the bodies' input of the current minibatch
	dFeat               []float32
	ObsDim, ActDim      int
	// recActor and recCritic are the bodies when they are recurrent (nil
	// otherwise); actState holds Act's own state (AgentConfig.Recurrent).
	recActor, recCritic *recBody
	actState            []float32
	after               []float32 // ValueAfter's states
	// ActorDim is the actor's input: the first ActorDim values of a row.
	ActorDim int
	evalIn   []float32 // the actor's columns of a minibatch (ActorDim < ObsDim)
	actIn    []float32 // the actor's columns for Act
	// NActions is the number of discrete actions; 0 for Box actions.
	NActions int
	Cat      nn.Categorical
	Gauss    *nn.DiagGaussian
	// Low and High are the Box action bounds (nil for Discrete).
	Low, High     []float32
	maskAt, maskN int // AgentConfig.MaskAt, MaskN
	// start is a Discrete space's first value: actions are stored as
	// indices 0…N−1 and the env receives index + start.
	start float32

	// VNorm is the value normalization (AgentConfig.ValueNorm), or nil:
	// the critic's outputs are then normalized values.
	VNorm *ValueNorm
	// ObsNorm and RNorm are the observation and reward normalization
	// (AgentConfig.NormObs, NormReward), or nil.
	ObsNorm *ObsNorm
	RNorm   *RewardNorm
	obsBuf  [2][]float32 // normalized observations: Learn/Evaluate's, Act's

	params      []*nn.Param // actor, critic, log-std, value_norm: checkpoint and optimizer order
	actorParams []*nn.Param // actor and log-std: the actor's half of Learn

	// workspaces, sized on first use
	idx []int     // discrete actions as ints
	out []float32 // actor output kept from Evaluate (a view into Actor's workspace)
	// catRows: log π, π and H of out's rows, from Evaluate to Backward
	catRows nn.CategoricalRows
	acts    []float32 // actions of the last Evaluate (the caller's minibatch)
	dOut    []float32
	batch   int

	// The two halves of Evaluate and Backward, built once so that running
	// them (in parallel through par) does not allocate.
	par                        *twin.Pair
	obs, logProbs, entropy     []float32
	values, dLogProb, dEntropy []float32
	dValue                     []float32
	actorEval, criticEval      func()
	actorBack, criticBack      func()
	actorLearn, criticLearn    func()
	policyLoss                 PolicyLoss
	valueLoss                  ValueLoss
	own                        [6][]float32
}

// PolicyLoss writes, for each row of a minibatch, the gradient of the loss
// with respect to log π(a|s) and to the entropy H, given their current
// values (see Agent.Learn).
type PolicyLoss func(dLogProb, dEntropy, logProb, entropy []float32)

// ValueLoss writes, for each row of a minibatch, the gradient of the loss
// with respect to V(s), given the current values (see Agent.Learn).
type ValueLoss func(dValue, value []float32)

// NewAgent builds the agent for the given spaces, drawing initial weights
// from r (critic first, then actor, as CleanRL's Agent.__init__ does).
func NewAgent(obsSpace, actSpace env.Space, cfg AgentConfig, r *rand.Rand) (*Agent, error) {
	sp, err := parseSpaces(obsSpace, actSpace)
	if err != nil {
		return nil, err
	}
	if err := checkObs(obsSpace, cfg.Encoder); err != nil {
		return nil, err
	}
	a := &Agent{ObsDim: sp.obsDim, ActDim: sp.actDim, NActions: sp.nActions, start: sp.start, Low: sp.low, High: sp.high}
	if a.NActions > 0 {
		a.Cat = nn.Categorical{N: a.NActions}
		a.catRows.N = a.NActions
	} else if a.Gauss, err = nn.NewDiagGaussian(a.ActDim, false, cfg.InitLogStd); err != nil {
		return nil, err
	}
	outDim := a.NActions
	if a.Gauss != nil {
		outDim = a.Gauss.OutDim()
	}
	if cfg.MaskN > 0 && (cfg.MaskN != a.NActions || cfg.MaskAt < 0 || cfg.MaskAt+cfg.MaskN > a.ObsDim) {
		return nil, fmt.Errorf("%w: an action mask of %d values at column %d for %d discrete actions and rows of %d", ErrSpace, cfg.MaskN, cfg.MaskAt, a.NActions, a.ObsDim)
	}
	a.maskAt, a.maskN = cfg.MaskAt, cfg.MaskN
	a.ActorDim = a.ObsDim
	if cfg.ActorObs != 0 {
		if cfg.ActorObs < 0 || cfg.ActorObs > a.ObsDim {
			return nil, fmt.Errorf("%w: actor_obs %d outside [0, %d] (the observation's values)", ErrSpace, cfg.ActorObs, a.ObsDim)
		}
		a.ActorDim = cfg.ActorObs
	}
	var actor, critic body
	if cfg.SharedEncoder {
		a.trunk, a.actorHead, a.critHead, err = newShared(obsSpace, outDim, cfg, r)
		actor, critic = a.actorHead, a.critHead
	} else {
		actor, critic, err = newBodies(obsSpace, a.ObsDim, a.ActorDim, outDim, cfg, r)
	}
	if err != nil {
		return nil, err
	}
	a.actor, a.critic = actor, critic
	a.recActor, _ = actor.(*recBody)
	a.recCritic, _ = critic.(*recBody)
	a.actState = make([]float32, a.StateDim())
	if a.trunk != nil {
		for _, p := range a.trunk.Params() {
			p.Name = "network." + p.Name
			a.params = append(a.params, p)
		}
	}
	for _, p := range actor.Params() {
		p.Name = "actor." + p.Name
		a.params = append(a.params, p)
		a.actorParams = append(a.actorParams, p)
	}
	for _, p := range critic.Params() {
		p.Name = "critic." + p.Name
		a.params = append(a.params, p)
	}
	if a.Gauss != nil {
		for _, p := range a.Gauss.Params() {
			p.Name = "actor_logstd"
			a.params = append(a.params, p)
			a.actorParams = append(a.actorParams, p)
		}
	}
	if cfg.ValueNorm {
		a.VNorm = newValueNorm()
		a.params = append(a.params, a.VNorm.p)
	}
	if cfg.ValueNorm && cfg.NormReward {
		return nil, fmt.Errorf("%w: value_norm and norm_reward both rescale the critic; choose one", ErrSpace)
	}
	if cfg.NormObs {
		if cfg.MaskN > 0 || encoder.IsConv(cfg.Encoder) {
			return nil, fmt.Errorf("%w: norm_obs takes flat observations without an action mask", ErrSpace)
		}
		a.ObsNorm = newObsNorm(a.ObsDim)
		a.params = append(a.params, a.ObsNorm.p)
	}
	if cfg.NormReward {
		a.RNorm = newRewardNorm()
		a.params = append(a.params, a.RNorm.p)
	}
	a.actorEval, a.criticEval = a.evaluateActor, a.evaluateCritic
	a.actorBack, a.criticBack = a.backwardActor, a.backwardCritic
	a.actorLearn, a.criticLearn = a.learnActor, a.learnCritic
	if cfg.Parallel {
		a.par = twin.New()
	}
	return a, nil
}

// newBodies builds the critic (one output) and then the actor (outDim
// outputs), in that order from r: MLPs on flat observations, or the
// encoder's convolutional networks on images.
func newBodies(obsSpace env.Space, obsDim, actorDim, outDim int, cfg AgentConfig, r *rand.Rand) (actor, critic body, err error) {
	if cfg.Recurrent != "" {
		if (cfg.Recurrent != RecurrentLSTM && cfg.Recurrent != RecurrentGRU) || cfg.RecurrentHidden < 1 {
			return nil, nil, fmt.Errorf("%w: recurrent core %q of %d units (want %q or %q, ≥ 1 unit)", nn.ErrConfig, cfg.Recurrent, cfg.RecurrentHidden, RecurrentLSTM, RecurrentGRU)
		}
		if encoder.IsConv(cfg.Encoder) || cfg.InputNorm || cfg.ActorObs != 0 || cfg.MaskN > 0 || cfg.ValueNorm {
			return nil, nil, fmt.Errorf("%w: a recurrent core takes encoder mlp without input_norm, value_norm, actor_obs or an action mask", ErrSpace)
		}
		c, err := newRecBody(obsDim, cfg.Hidden, cfg.Recurrent, cfg.RecurrentHidden, cfg.RecurrentAfter, 1, cfg.Act, cfg.OrthoInit, 1, cfg.Gemm, r)
		if err != nil {
			return nil, nil, fmt.Errorf("onpolicy: critic: %w", err)
		}
		a, err := newRecBody(actorDim, cfg.Hidden, cfg.Recurrent, cfg.RecurrentHidden, cfg.RecurrentAfter, outDim, cfg.Act, cfg.OrthoInit, 0.01, cfg.Gemm, r)
		if err != nil {
			return nil, nil, fmt.Errorf("onpolicy: actor: %w", err)
		}
		return a, c, nil
	}
	if encoder.IsConv(cfg.Encoder) {
		if cfg.InputNorm || cfg.ActorObs != 0 || cfg.MaskN > 0 {
			return nil, nil, fmt.Errorf("%w: encoder %s takes whole image observations: no input_norm, actor_obs or action mask", ErrSpace, cfg.Encoder)
		}
		c, err := encoder.NewConv(cfg.Encoder, obsSpace, cfg.Hidden, 1, r)
		if err != nil {
			return nil, nil, fmt.Errorf("onpolicy: critic: %w", err)
		}
		a, err := encoder.NewConv(cfg.Encoder, obsSpace, cfg.Hidden, outDim, r)
		if err != nil {
			return nil, nil, fmt.Errorf("onpolicy: actor: %w", err)
		}
		return a, c, nil
	}
	c, err := newNet(obsDim, cfg.Hidden, 1, cfg.Act, cfg.OrthoInit, 1, cfg.Gemm, r)
	if err != nil {
		return nil, nil, fmt.Errorf("onpolicy: critic: %w", err)
	}
	if cfg.InputNorm {
		c.withInputNorm(obsDim)
	}
	a, err := newNet(actorDim, cfg.Hidden, outDim, cfg.Act, cfg.OrthoInit, 0.01, cfg.Gemm, r)
	if err != nil {
		return nil, nil, fmt.Errorf("onpolicy: actor: %w", err)
	}
	if cfg.InputNorm {
		a.withInputNorm(actorDim)
	}
	return a, c, nil
}

// head is a linear layer on the shared encoder's output that keeps the
// gradient of its input for the encoder's backward pass.
type head struct {
	m   *nn.MLP
	dIn []float32
}

func (h *head) Params() []*nn.Param                             { return h.m.Params() }
func (h *head) Reserve(b int)                                   { h.m.Reserve(b) }
func (h *head) Forward(x []float32, batch int) []float32        { return h.m.Forward(x, batch) }
func (h *head) ForwardTo(dst, x []float32, batch int) []float32 { return h.m.ForwardTo(dst, x, batch) }
func (h *head) Backward(dOut []float32)                         { h.dIn = h.m.Backward(dOut) }

// newShared builds the shared encoder, then the actor's head (outDim
// outputs) and the critic's (one), in that order from r (CleanRL's
// ppo_atari.py Agent.__init__); PyTorch's default inits, as the separate
// convolutional bodies have. The heads' parameters are named "weight"
// and "bias" (nn.Linear modules of their own).
func newShared(obsSpace env.Space, outDim int, cfg AgentConfig, r *rand.Rand) (*encoder.Conv, *head, *head, error) {
	if !encoder.IsConv(cfg.Encoder) || cfg.Recurrent != "" || cfg.InputNorm || cfg.ActorObs != 0 || cfg.MaskN > 0 {
		return nil, nil, nil, fmt.Errorf("%w: a shared encoder takes a convolutional encoder (minatar, nature or impala) without a recurrent core, input_norm, actor_obs or an action mask; encoder %q", ErrSpace, cfg.Encoder)
	}
	trunk, err := encoder.NewTrunk(cfg.Encoder, obsSpace, cfg.Hidden, r)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("onpolicy: shared encoder: %w", err)
	}
	var heads [2]*head
	for i, out := range []int{outDim, 1} {
		m, err := nn.NewMLP(nn.MLPConfig{In: trunk.Out(), Out: out, OutAct: nn.Identity, Gemm: cfg.Gemm}, r)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("onpolicy: shared encoder head: %w", err)
		}
		for _, p := range m.Params() {
			_, p.Name, _ = cut(p.Name)
		}
		heads[i] = &head{m: m}
	}
	return trunk, heads[0], heads[1], nil
}

// features is the bodies' input for n rows of obs: obs itself, or the
// shared encoder's output, valid until its next forward pass.
func (a *Agent) features(obs []float32, n int) []float32 {
	if a.trunk == nil {
		return obs
	}
	return a.trunk.Forward(obs, n)
}

// backwardTrunk sums the heads' input gradients of the last backward pass
// (the critic's only when it had one) and runs the shared encoder's
// backward pass on the sum.
func (a *Agent) backwardTrunk() {
	if a.trunk == nil {
		return
	}
	a.dFeat = scratch.Resize(a.dFeat, len(a.actorHead.dIn))
	copy(a.dFeat, a.actorHead.dIn)
	if a.dValue != nil {
		for i, v := range a.critHead.dIn {
			a.dFeat[i] += v
		}
	}
	a.trunk.Backward(a.dFeat)
}

// StateDim is the recurrent state of one env: the actor's then the
// critic's (an LSTM's (h, c), a GRU's h), 4·RecurrentHidden or
// 2·RecurrentHidden values; 0 for an agent without a recurrent core.
func (a *Agent) StateDim() int {
	if a.recActor == nil {
		return 0
	}
	return a.recActor.stateDim() + a.recCritic.stateDim()
}

// SetSequences makes the next Evaluate or Learn run t steps of b
// sequences (the minibatch's rows time-major, t·b of them) from the
// states state (b rows of StateDim values), resetting sequence j to the
// zero state before step s where starts[s·b+j] (nil: none). It does
// nothing for an agent without a recurrent core.
func (a *Agent) SetSequences(t, b int, state []float32, starts []bool) {
	if a.recActor == nil {
		return
	}
	if len(state) != b*a.StateDim() || (starts != nil && len(starts) != t*b) {
		panic(fmt.Sprintf("onpolicy: SetSequences: %d state values and %d starts for %d steps × %d sequences of state %d", len(state), len(starts), t, b, a.StateDim()))
	}
	sd, ad := a.StateDim(), a.recActor.stateDim()
	a.recActor.seq(t, b, state, sd, 0, starts)
	a.recCritic.seq(t, b, state, sd, ad, starts)
}

// finalStateTo writes each sequence's state after the last forward pass of
// both networks into dst (b rows of StateDim values).
func (a *Agent) finalStateTo(dst []float32) {
	sd := a.StateDim()
	a.recActor.finalTo(dst, sd, 0)
	a.recCritic.finalTo(dst, sd, a.recActor.stateDim())
}

// ValueAfter writes V(obs) for the n sequences of the last Evaluate into
// dst[:n] and returns it: obs[e] is the observation after sequence e's
// last step, read from the state that step left, or from the zero state
// where lastDones[e] ≠ 0 (the step ended an episode, and obs begins the
// next). It is Value for an agent without a recurrent core. The next
// Evaluate or Learn of a recurrent agent needs SetSequences again.
func (a *Agent) ValueAfter(dst, obs, lastDones []float32, n int) []float32 {
	if sd := a.StateDim(); sd > 0 {
		a.after = scratch.Resize(a.after, n*sd)
		a.finalStateTo(a.after)
		for e, d := range lastDones[:n] {
			if d != 0 {
				clear(a.after[e*sd : (e+1)*sd])
			}
		}
		a.SetSequences(1, n, a.after, nil)
	}
	return a.Value(dst, obs, n)
}

// ResetEnv zeroes Act's recurrent state: the next Act begins an episode.
func (a *Agent) ResetEnv(int) { clear(a.actState) }

// ActState is the recurrent state Act carries (the actor's h and c, then
// the critic's, unused by Act), valid until the next Act.
func (a *Agent) ActState() []float32 { return a.actState }

// Close stops the agent's worker goroutine (AgentConfig.Parallel) and waits
// for it. The agent stays usable, computing on the caller's goroutine.
func (a *Agent) Close() { a.par.Close() }

// isStats reports whether p holds statistics (value, observation or
// reward normalization) rather than weights.
func (a *Agent) isStats(p *nn.Param) bool {
	return (a.VNorm != nil && p == a.VNorm.p) || (a.ObsNorm != nil && p == a.ObsNorm.p) || (a.RNorm != nil && p == a.RNorm.p)
}

// denormalize turns the critic's outputs into values in place
// (ValueNorm, RewardNorm).
func (a *Agent) denormalize(v []float32) {
	a.VNorm.denormalize(v)
	if a.RNorm != nil {
		s := a.RNorm.Scale()
		for i := range v {
			v[i] *= s
		}
	}
}

// Reserve sizes the networks' buffers for batches up to b.
func (a *Agent) Reserve(b int) {
	a.actor.Reserve(b)
	a.critic.Reserve(b)
}

// Params returns every trainable parameter (actor, critic, log-std), the
// list one optimizer steps and one ClipGradNorm covers, as CleanRL's
// agent.parameters().
func (a *Agent) Params() []*nn.Param { return a.params }

// ZeroGrad zeroes every gradient.
func (a *Agent) ZeroGrad() { nn.ZeroGrads(a.params) }

// Value writes V(obs_r) for batch rows into dst and returns it
// (denormalized with ValueNorm).
func (a *Agent) Value(dst, obs []float32, batch int) []float32 {
	v := a.critic.ForwardTo(dst[:batch], a.features(a.ObsNorm.to(&a.obsBuf[1], obs, batch), batch), batch)
	a.denormalize(v)
	return v
}

// Evaluate runs both networks on a minibatch of batch rows and writes
// log π(actions|obs), the policy entropy and V(obs) (CleanRL's
// get_action_and_value with the stored actions; with ValueNorm the
// critic's normalized output). The outputs are kept for Backward.
func (a *Agent) Evaluate(logProbs, entropy, values, obs, actions []float32, batch int) {
	a.batch = batch
	a.acts = actions[:batch*a.ActDim]
	a.obs, a.logProbs, a.entropy, a.values = obs, logProbs[:batch], entropy[:batch], values[:batch]
	a.x = a.features(a.ObsNorm.to(&a.obsBuf[0], obs, batch), batch)
	a.par.Do(a.actorEval, a.criticEval)
}

// actorInput returns the actor's columns of n rows of obs: obs itself, or
// its first ActorDim values per row copied into buf.
func (a *Agent) actorInput(buf *[]float32, obs []float32, n int) []float32 {
	if a.ActorDim == a.ObsDim {
		return obs
	}
	*buf = scratch.Resize(*buf, n*a.ActorDim)
	for r := range n {
		copy((*buf)[r*a.ActorDim:(r+1)*a.ActorDim], obs[r*a.ObsDim:r*a.ObsDim+a.ActorDim])
	}
	return *buf
}

// maskedLogit is the logit of an illegal action: exp(maskedLogit − max)
// is 0 in float32, and 0·maskedLogit is 0 in the entropy, so a masked
// action has probability 0 and changes neither log π nor H.
const maskedLogit = -1e9

// maskLogits replaces, in n rows of logits, those of the actions that
// the rows' masks mark illegal.
func (a *Agent) maskLogits(logits, obs []float32, n int) {
	if a.maskN == 0 {
		return
	}
	for r := range n {
		m := obs[r*a.ObsDim+a.maskAt : r*a.ObsDim+a.maskAt+a.maskN]
		for k, v := range m {
			if v == 0 {
				logits[r*a.NActions+k] = maskedLogit
			}
		}
	}
}

func (a *Agent) evaluateActor() {
	a.out = a.actor.Forward(a.actorInput(&a.evalIn, a.x, a.batch), a.batch)
	a.maskLogits(a.out, a.obs, a.batch)
	if a.Gauss != nil {
		a.Gauss.LogProbTo(a.logProbs, a.out, a.acts)
		a.Gauss.EntropyTo(a.entropy, a.out)
		return
	}
	idx := a.ints(a.batch)
	for k := range idx {
		idx[k] = int(a.acts[k])
	}
	a.catRows.Eval(a.out)
	a.catRows.LogProbTo(a.logProbs, idx)
	a.catRows.EntropyTo(a.entropy)
}

func (a *Agent) evaluateCritic() { a.critic.ForwardTo(a.values, a.x, a.batch) }

// Backward accumulates the gradients of a loss that depends on the last
// Evaluate's log-probabilities, entropies and values through dLogProb,
// dEntropy and dValue (one per row; each may be nil for zero).
func (a *Agent) Backward(dLogProb, dEntropy, dValue []float32) {
	a.dLogProb, a.dEntropy, a.dValue = dLogProb, dEntropy, dValue
	a.par.Do(a.actorBack, a.criticBack)
	a.backwardTrunk()
}

func (a *Agent) backwardActor() {
	a.dOut = scratch.Resize(a.dOut, len(a.out))
	if a.Gauss != nil {
		a.Gauss.Backward(a.dOut, a.out, a.acts, a.dLogProb, a.dEntropy)
	} else {
		a.catRows.Backward(a.dOut, a.idx[:a.batch], a.dLogProb, a.dEntropy)
		if a.maskN > 0 { // a masked logit is a constant, not the network's
			for i, v := range a.out {
				if v == maskedLogit {
					a.dOut[i] = 0
				}
			}
		}
	}
	a.actor.Backward(a.dOut)
}

func (a *Agent) backwardCritic() {
	if a.dValue != nil {
		a.critic.Backward(a.dValue[:a.batch])
	}
}

// Learn is Evaluate, the loss gradients and Backward in one pass, after
// zeroing the gradients: the actor's half (forward, log π and H,
// policyLoss, head and actor backward) and the critic's half (forward,
// valueLoss, critic backward) share nothing, so with AgentConfig.Parallel
// they run on two goroutines with one hand-off per minibatch instead of
// two. policyLoss runs on the caller's goroutine, valueLoss on the
// worker's; each may keep statistics of its own, read after Learn returns.
// The per-row buffers are the agent's, valid until the next call.
func (a *Agent) Learn(obs, actions []float32, batch int, policyLoss PolicyLoss, valueLoss ValueLoss) {
	a.batch = batch
	a.obs, a.acts = obs, actions[:batch*a.ActDim]
	// Learn's own buffers: Evaluate and Backward alias the caller's.
	for i, b := range a.own {
		a.own[i] = scratch.Resize(b, batch)
	}
	a.logProbs, a.entropy, a.values = a.own[0], a.own[1], a.own[2]
	a.dLogProb, a.dEntropy, a.dValue = a.own[3], a.own[4], a.own[5]
	a.policyLoss, a.valueLoss = policyLoss, valueLoss
	a.x = a.features(a.ObsNorm.to(&a.obsBuf[0], obs, batch), batch)
	a.par.Do(a.actorLearn, a.criticLearn)
	if a.trunk != nil {
		a.trunk.ZeroGrad()
		a.backwardTrunk()
	}
}

func (a *Agent) learnActor() {
	a.evaluateActor()
	a.policyLoss(a.dLogProb, a.dEntropy, a.logProbs, a.entropy)
	nn.ZeroGrads(a.actorParams)
	a.backwardActor()
}

func (a *Agent) learnCritic() {
	a.evaluateCritic()
	a.valueLoss(a.dValue, a.values)
	nn.ZeroGrads(a.critic.Params())
	a.backwardCritic()
}

// Act writes the deterministic action for one observation into dst: the
// most likely discrete action, or the Gaussian mean clipped to the bounds.
// It implements algo.Policy.
//
// A recurrent agent carries its state from one Act to the next (the
// critic's part unused) until ResetEnv.
func (a *Agent) Act(dst, obs []float32) []float32 {
	if a.recActor != nil {
		a.recActor.seq(1, 1, a.actState, a.StateDim(), 0, nil)
	}
	out := a.actor.Forward(a.actorInput(&a.actIn, a.features(a.ObsNorm.to(&a.obsBuf[1], obs, 1), 1), 1), 1)
	if a.recActor != nil {
		a.recActor.finalTo(a.actState, a.StateDim(), 0)
	}
	if a.Gauss != nil {
		a.Gauss.ModeTo(dst[:a.ActDim], out)
		for j, v := range dst[:a.ActDim] {
			dst[j] = min(max(v, a.Low[j]), a.High[j])
		}
		return dst[:a.ActDim]
	}
	a.maskLogits(out, obs, 1)
	idx := a.ints(1)
	a.Cat.ArgmaxTo(idx, out)
	dst[0] = float32(idx[0]) + a.start
	return dst[:1]
}

// Save writes every parameter to path as safetensors (atomically, through
// nn.SaveFile), with metadata naming the format. It implements algo.Model.
func (a *Agent) Save(path string) error {
	return nn.SaveFile(path, a.params, map[string]string{"format": "herd-actor-critic"})
}

// Load reads parameters written by Save into the agent.
func (a *Agent) Load(path string) error {
	_, err := nn.LoadFile(path, a.params)
	return err
}

func (a *Agent) ints(n int) []int {
	if cap(a.idx) < n {
		a.idx = make([]int, n)
	}
	a.idx = a.idx[:n]
	return a.idx
}

// LoadAgent rebuilds the agent for env id from a checkpoint written by Save
// (for `herd eval`): the spaces come from a fresh env, the weights from the
// file, so the initial draw from r does not matter.
func LoadAgent(path string, mk env.Maker, id string, cfg AgentConfig, r *rand.Rand) (*Agent, error) {
	e, err := mk.Make(id)
	if err != nil {
		return nil, err
	}
	defer e.Close()
	rows, _ := env.RowsOf(e)
	a, err := NewAgent(e.ObservationSpace(), e.ActionSpace(), withRows(cfg, rows), r)
	if err != nil {
		return nil, err
	}
	if err := a.Load(path); err != nil {
		return nil, err
	}
	return a, nil
}

// withRows is cfg with the action mask of the env's rows located
// (AgentConfig.MaskAt, MaskN).
func withRows(cfg AgentConfig, rows env.RowLayout) AgentConfig {
	if rows.Mask > 0 {
		cfg.MaskAt, cfg.MaskN = rows.Local(), rows.Mask
	}
	return cfg
}

// Networks lists an Agent's networks for cfg and the spaces
// (algo.Networker): the actor and the critic, both trained (RMSProp keeps
// one moment per parameter, Adam two) and both held by a policy copy.
func Networks(obs, act env.Space, cfg AgentConfig, rmsProp bool) []algo.Network {
	moments := 2
	if rmsProp {
		moments = 1
	}
	actorIn := obs.Dim()
	if cfg.ActorObs > 0 {
		actorIn = cfg.ActorObs
	}
	return []algo.Network{
		{Name: "actor", In: actorIn, Out: algo.OutWidth(act), Hidden: cfg.Hidden, Moments: moments, Acts: true},
		{Name: "critic", In: obs.Dim(), Out: 1, Hidden: cfg.Hidden, Moments: moments, Acts: true},
	}
}
