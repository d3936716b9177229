package ppo

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"herd/algo"
	"herd/algo/internal/onpolicy"
	"herd/env"
	"herd/internal/rng"
	"herd/internal/scratch"
	"herd/nn"
	"herd/sample"
)

// ---------------------------------------------------------------------------
// 1. Config (CleanRL ppo.py Args; defaults are CleanRL's)
// ---------------------------------------------------------------------------

// Config holds PPO's settings. The yaml keys are CleanRL's argument names.
type Config struct {
	// Rollout.
	NumEnvs  int `yaml:"num_envs"`  // parallel envs; default 4
	NumSteps int `yaml:"num_steps"` // steps per env per rollout; default 128

	// Optimisation.
	LearningRate float32 `yaml:"learning_rate"` // Adam step size; default 2.5e-4
	AnnealLR     bool    `yaml:"anneal_lr"`     // anneal the LR linearly to 0; default true
	// AnnealClip anneals clip_coef linearly to 0 with the learning
	// rate's fraction (rl-zoo's clip_range: lin_ε); default false.
	AnnealClip     bool    `yaml:"anneal_clip,omitempty"`
	AdamEps        float32 `yaml:"adam_eps"`        // Adam ε; default 1e-5
	NumMinibatches int     `yaml:"num_minibatches"` // minibatches per epoch; default 4
	UpdateEpochs   int     `yaml:"update_epochs"`   // epochs per rollout (K); default 4
	MaxGradNorm    float32 `yaml:"max_grad_norm"`   // global grad-norm clip, 0 = off; default 0.5
	TargetKL       float64 `yaml:"target_kl"`       // stop the epochs above this approx KL, 0 = off; default 0

	// Objective.
	Gamma     float32 `yaml:"gamma"`      // discount γ; default 0.99
	GAELambda float32 `yaml:"gae_lambda"` // GAE λ; default 0.95
	NormAdv   bool    `yaml:"norm_adv"`   // normalise advantages per minibatch; default true
	ClipCoef  float32 `yaml:"clip_coef"`  // surrogate clip ε; default 0.2
	ClipVLoss bool    `yaml:"clip_vloss"` // clip the value loss too; default true
	EntCoef   float32 `yaml:"ent_coef"`   // entropy bonus coefficient; default 0.01
	VFCoef    float32 `yaml:"vf_coef"`    // value loss coefficient; default 0.5
	// HuberDelta > 0 replaces the value loss ½e² by the Huber loss of
	// the error e with this δ (MAPPO: 10); 0 (default) keeps ½e².
	HuberDelta float32 `yaml:"huber_delta,omitempty"`
	// ValueNorm normalizes the value targets with MAPPO's running mean
	// and std (onpolicy.ValueNorm): the critic learns (R − μ)/σ, values
	// leave it denormalized; the value clip and loss are taken in the
	// normalized space, as MAPPO takes them. Default false.
	ValueNorm bool `yaml:"value_norm,omitempty"`
	// InputNorm puts a LayerNorm of the input before the actor's and the
	// critic's first layer (MAPPO's feature normalization). Default false.
	InputNorm bool `yaml:"input_norm,omitempty"`
	// NormObs normalizes each observation value by the running mean and
	// variance of the observations learned from, clipped to ±10; NormReward
	// divides the rewards by the running std of the discounted return
	// (as a scale of the critic). Together they are SB3's VecNormalize,
	// rl-zoo's normalize: true (docs/guide/recurrent.md). Default false.
	NormObs    bool `yaml:"norm_obs,omitempty"`
	NormReward bool `yaml:"norm_reward,omitempty"`

	// Networks.
	// Encoder is the networks' input stage: mlp (flat observations) or
	// minatar / nature / impala (image observations, a Box [height, width,
	// channels]: that preset's convolutions or, for impala, the paper's
	// residual stages, then hidden ReLU layers, in the actor and in the
	// critic). Default mlp.
	Encoder    string  `yaml:"encoder"`
	Hidden     []int   `yaml:"hidden"`       // hidden widths of actor and critic; default [64, 64]
	Activation string  `yaml:"activation"`   // hidden activation; default tanh
	OrthoInit  bool    `yaml:"ortho_init"`   // orthogonal init (gains √2, 0.01, 1); default true
	InitLogStd float32 `yaml:"init_log_std"` // Gaussian log-std at start (Box actions); default 0

	// SharedEncoder gives the actor and the critic one encoder (the
	// convolutions and the hidden ReLU layers) and a linear head each,
	// CleanRL's ppo_atari.py Agent; the heads' gradients add up in it.
	// Needs a convolutional encoder. Default false (separate networks).
	SharedEncoder bool `yaml:"shared_encoder,omitempty"`

	// ActorObs > 0: the actor reads only the first ActorObs observation
	// values, the critic all of them (MAPPO with a multi-agent env's
	// "state=true" rows); default 0 (all).
	ActorObs int `yaml:"actor_obs,omitempty"`
	// Recurrent puts an LSTM between each network's encoder (the Hidden
	// layers) and its head: PPO-LSTM (CleanRL ppo_atari_lstm.py). The
	// state per env travels with the rollout and each minibatch is
	// num_envs / num_minibatches whole env sequences. Default: none.
	Recurrent RecurrentConfig `yaml:"recurrent,omitempty"`

	// Execution.
	Parallel bool `yaml:"parallel"` // actor and critic passes on two goroutines (same results); default true
	// DelayedGradient: a segment gathered one version behind the learner
	// (the HTS executor) has every minibatch gradient evaluated at the
	// behaviour parameters θ_{k−1} moved by the update's steps so far, and
	// applied to θ_k (HTS-RL Eq. 6 carried over to PPO's epochs); false
	// evaluates it at θ_k and corrects the lag through the importance
	// ratio against the behaviour log-probabilities, as the HTS-RL
	// authors' released learner does. Changes nothing when there is no
	// lag (the local executor). Default true: on CartPole under HTS it
	// reached 500 in 5 of 5 seeds, the ratio form in 4 of 5
	// (docs/BENCHMARKS.md).
	DelayedGradient bool `yaml:"delayed_gradient"`
}

// RecurrentConfig is the network spec's recurrent core.
type RecurrentConfig = onpolicy.RecurrentConfig

// DefaultRecurrentHidden is the LSTM width of ppo_atari_lstm.py.
const DefaultRecurrentHidden = onpolicy.DefaultRecurrentHidden

// IsRecurrent reports whether the networks carry a state per env.
func (c *Config) IsRecurrent() bool { return c.Recurrent.On() }

// Lacks is what a recurrent config cannot do (algo.Limiter): its policy
// is not a function of one observation, so it cannot act in a policy
// worker or a slot that neither keeps nor carries each env's state (HTS's
// policy workers keep them, dist's env workers carry them); its minibatches
// are whole env sequences, which data-parallel learners do not split; and
// the several policies of a multiagent section are not given a state.
func (c *Config) Lacks() (algo.Capability, string) {
	if lacks, why := c.Recurrent.Lacks("ppo"); lacks != 0 {
		return lacks | algo.CanDataParallel, why
	}
	if c.NormObs || c.NormReward {
		return algo.CanDataParallel, "ppo with norm_obs or norm_reward: each data-parallel learner would fold the statistics of its own rows"
	}
	return 0, ""
}

// DefaultConfig returns CleanRL's ppo.py defaults.
func DefaultConfig() Config {
	return Config{
		NumEnvs: 4, NumSteps: 128,
		LearningRate: 2.5e-4, AnnealLR: true, AdamEps: 1e-5,
		NumMinibatches: 4, UpdateEpochs: 4, MaxGradNorm: 0.5,
		Gamma: 0.99, GAELambda: 0.95, NormAdv: true,
		ClipCoef: 0.2, ClipVLoss: true, EntCoef: 0.01, VFCoef: 0.5,
		Hidden: []int{64, 64}, Activation: "tanh", OrthoInit: true, Encoder: "mlp",
		Parallel: true, DelayedGradient: true,
	}
}

// Validate reports every problem with the config, given the run header.
func (c *Config) Validate(h algo.Header) error {
	p := algo.Problems{Name: "ppo"}
	onpolicy.Common{NumEnvs: c.NumEnvs, NumSteps: c.NumSteps, LearningRate: c.LearningRate,
		MaxGradNorm: c.MaxGradNorm, Gamma: c.Gamma, GAELambda: c.GAELambda, EntCoef: c.EntCoef, VFCoef: c.VFCoef,
		Hidden: c.Hidden, Activation: c.Activation, Encoder: c.Encoder, SharedEncoder: c.SharedEncoder,
		Recurrent: c.IsRecurrent()}.Check(p.Add, h)
	if c.NumMinibatches < 1 {
		p.Add("num_minibatches must be >= 1, got %d", c.NumMinibatches)
	} else if c.NumEnvs >= 1 && c.NumSteps >= 1 && (c.NumEnvs*c.NumSteps)%c.NumMinibatches != 0 {
		p.Add("num_minibatches (%d) must divide num_envs × num_steps (%d)", c.NumMinibatches, c.NumEnvs*c.NumSteps)
	}
	if c.UpdateEpochs < 1 {
		p.Add("update_epochs must be >= 1, got %d", c.UpdateEpochs)
	}
	if !(c.AdamEps > 0) {
		p.Add("adam_eps must be > 0, got %v", c.AdamEps)
	}
	if c.TargetKL < 0 {
		p.Add("target_kl must be >= 0, got %v", c.TargetKL)
	}
	if !(c.ClipCoef > 0) {
		p.Add("clip_coef must be > 0, got %v", c.ClipCoef)
	}
	if c.ActorObs < 0 {
		p.Add("actor_obs must be >= 0, got %d", c.ActorObs)
	}
	c.Recurrent.Check(p.Add)
	if c.IsRecurrent() {
		switch {
		case c.NumMinibatches >= 1 && c.NumEnvs%c.NumMinibatches != 0:
			p.Add("with a recurrent core each minibatch is whole env sequences: num_minibatches (%d) must divide num_envs (%d)", c.NumMinibatches, c.NumEnvs)
		case c.Encoder != "" && c.Encoder != "mlp", c.ValueNorm, c.InputNorm, c.ActorObs != 0:
			p.Add("a recurrent core takes encoder mlp without value_norm, input_norm or actor_obs")
		}
	}
	if c.NormReward && c.ValueNorm {
		p.Add("norm_reward and value_norm both rescale the critic; choose one")
	}
	if c.NormObs && c.Encoder != "" && c.Encoder != "mlp" {
		p.Add("norm_obs takes encoder mlp (flat observations), got %q", c.Encoder)
	}
	if !(c.HuberDelta >= 0) || math.IsInf(float64(c.HuberDelta), 0) {
		p.Add("huber_delta must be a finite number >= 0 (0: squared error), got %v", c.HuberDelta)
	}
	return p.Err()
}

// RolloutShape is what the HTS executor needs of the config: the envs, the
// segment length and the discount of the truncation bootstrap.
func (c *Config) RolloutShape() (numEnvs, numSteps int, gamma float32) {
	return c.NumEnvs, c.NumSteps, c.Gamma
}

func (c *Config) agentConfig() onpolicy.AgentConfig {
	act, _ := nn.ParseActivation(c.Activation)
	a := onpolicy.AgentConfig{Encoder: c.Encoder, SharedEncoder: c.SharedEncoder, Hidden: c.Hidden, Act: act, OrthoInit: c.OrthoInit, InitLogStd: c.InitLogStd,
		ActorObs: c.ActorObs, ValueNorm: c.ValueNorm, InputNorm: c.InputNorm, Parallel: c.Parallel,
		NormObs: c.NormObs, NormReward: c.NormReward}
	c.Recurrent.Set(&a)
	return a
}

// Scalars are the metrics PPO reports (CleanRL's names).
func Scalars() []string {
	return []string{"charts/learning_rate", "losses/value_loss", "losses/policy_loss", "losses/entropy",
		"losses/old_approx_kl", "losses/approx_kl", "losses/clipfrac", "losses/explained_variance"}
}

// Spec describes PPO to the CLI (algo/all).
func Spec() algo.Spec {
	return algo.Spec{
		Name:       "ppo",
		Can:        algo.CanSegmentLearner | algo.CanDataParallel | algo.CanBehaviourLogProbs | algo.CanAgentRows | algo.CanStatelessPolicy | algo.CanCarriedState,
		Doc:        "Proximal Policy Optimization (clipped surrogate, GAE), discrete and continuous actions",
		Scalars:    Scalars(),
		NewConfig:  func() algo.Config { c := DefaultConfig(); return &c },
		Train:      onpolicy.TrainFunc("ppo", Train),
		LoadPolicy: LoadPolicy,
		Pieces:     onpolicy.PiecesFunc("ppo", Pieces),
		Resumable:  true,
	}
}

// LoadPolicy rebuilds the deterministic policy from a checkpoint.
func LoadPolicy(path string, h algo.Header, c algo.Config) (algo.Policy, error) {
	return onpolicy.LoadPolicy("ppo", path, h, c, (*Config).agentConfig)
}

// ---------------------------------------------------------------------------
// 2. Pieces: the policy (actor and critic forward: rows [logits or μ, log σ
// | V(s)]) and the sampler are onpolicy's, shared with A2C; the learner
// (below) is PPO's own: GAE, then K epochs of clipped-surrogate minibatches.
// ---------------------------------------------------------------------------

// Pieces cuts PPO into the policy, sampler and learner of a run on spaces
// sp, for any executor.
func Pieces(h algo.Header, cfg *Config, sp algo.Spaces) (*algo.Pieces, error) {
	if err := errors.Join(h.Validate(), cfg.Validate(h)); err != nil {
		return nil, err
	}
	return onpolicy.NewPieces("ppo", h, sp, cfg.agentConfig(), func() (algo.SegmentLearner, error) {
		return newLearner(h, cfg, sp)
	})
}

// ---------------------------------------------------------------------------
// 3. Train: the local executor (onpolicy.TrainLocal) — per iteration, one
// rollout of num_steps × num_envs with the policy and sampler, then
// learner.Learn, then the new weights to the policy.
// ---------------------------------------------------------------------------

// Train runs PPO (Schulman et al. 2017) on rt.Header.Env for rt.Header.Steps
// environment steps, following CleanRL's ppo.py line by line. It returns
// the agent; on cancellation of ctx it stops between iterations and
// returns the agent trained so far with ctx.Err().
func Train(ctx context.Context, rt *algo.Runtime, cfg *Config) (*onpolicy.Agent, error) {
	h := rt.Header
	if err := errors.Join(h.Validate(), cfg.Validate(h)); err != nil {
		return nil, err
	}
	return onpolicy.TrainLocal(ctx, rt, "ppo", onpolicy.Local{NumEnvs: cfg.NumEnvs, NumSteps: cfg.NumSteps, Gamma: cfg.Gamma},
		func(sp algo.Spaces) (*algo.Pieces, error) { return Pieces(h, cfg, sp) })
}

// ---------------------------------------------------------------------------
// 4. Learn: one iteration of CleanRL's update on a segment
// ---------------------------------------------------------------------------

// learner is PPO's algo.SegmentLearner.
type learner struct {
	*onpolicy.Learner // agent, Adam, GAE buffers, versions
	cfg               *Config
	rMB               *rand.Rand
	mbSrc             *rand.PCG // rMB's source, which a checkpoint saves
	mb                *minibatch
	loss              *losses
	bInds             []int
	// A recurrent agent's minibatches are whole env sequences: envInds
	// is the env order each epoch shuffles, seq the sequences of one
	// minibatch.
	envInds []int
	seq     sequences

	// Data-parallel learning (SetReducer): red joins the other learners;
	// g is the gradient buffer that goes through it; norm holds each
	// minibatch's advantage mean and std over all learners' rows, sums
	// the per-minibatch sums that compute them.
	red        algo.Reducer
	iterations int // Iterations for one learner
	g          *algo.Grad
	norm       [][2]float64
	sums       []float64
}

func newLearner(h algo.Header, cfg *Config, sp algo.Spaces) (*learner, error) {
	opt, err := nn.NewAdam(nn.AdamConfig{LR: cfg.LearningRate, Eps: cfg.AdamEps})
	if err != nil {
		return nil, fmt.Errorf("ppo: %w", err)
	}
	numIterations := int(h.Steps / int64(cfg.NumEnvs*cfg.NumSteps))
	base, err := onpolicy.NewLearner("ppo", h, sp, cfg.agentConfig(), opt, numIterations, cfg.Gamma, cfg.GAELambda)
	if err != nil {
		return nil, err
	}
	base.Delayed = cfg.DelayedGradient
	src := rng.Source(h.Seed, "ppo/minibatch", 0)
	l := &learner{Learner: base, cfg: cfg, rMB: rand.New(src), mbSrc: src, iterations: numIterations}
	l.mb = newMinibatch(base.Agent.ObsDim, base.Agent.ActDim)
	l.loss = newLosses(cfg, l.mb)
	switch a := base.Agent; {
	case a.VNorm != nil:
		l.loss.vn = a.VNorm
	case a.RNorm != nil:
		l.loss.vn = a.RNorm
	}
	return l, nil
}

// Learn runs one PPO iteration on seg: GAE, then K epochs of shuffled
// minibatches, and returns CleanRL's scalars.
func (l *learner) Learn(ctx context.Context, seg *sample.Segment) ([]algo.Stat, error) {
	// Bootstrap value and GAE (truncations were bootstrapped by the env worker).
	iteration, err := l.Begin(ctx, seg)
	if err != nil {
		return nil, err
	}
	cfg, agent, opt := l.cfg, l.Agent, l.Opt
	params := agent.Params()
	batchSize := seg.T * seg.N
	if batchSize%cfg.NumMinibatches != 0 {
		return nil, fmt.Errorf("%w: ppo: num_minibatches (%d) must divide the segment's %d steps", sample.ErrShape, cfg.NumMinibatches, batchSize)
	}
	mbSize := batchSize / cfg.NumMinibatches
	l.mb.resize(mbSize)
	agent.Reserve(mbSize)
	if len(l.bInds) != batchSize {
		l.bInds = make([]int, batchSize)
		for i := range l.bInds {
			l.bInds[i] = i
		}
	}
	bInds := l.bInds
	swap := func(i, j int) { bInds[i], bInds[j] = bInds[j], bInds[i] }

	// Annealing the learning rate: frac = 1 − (iteration−1)/numIterations.
	if cfg.AnnealLR {
		opt.SetLR(nn.LinearSchedule(cfg.LearningRate, 0, iteration-1, l.Iterations))
	}
	l.loss.eps = cfg.ClipCoef
	if cfg.AnnealClip {
		l.loss.eps = nn.LinearSchedule(cfg.ClipCoef, 0, iteration-1, l.Iterations)
	}

	// Optimizing the policy and value network: K epochs of minibatches.
	loss := l.loss
	loss.reset()
	if loss.vn != nil {
		// The segment's values were denormalized with these statistics
		// (the acting weights'); the value clip takes them back to the
		// critic's outputs.
		loss.mean0, loss.std0 = loss.vn.MeanStd()
	}
	recurrent := agent.StateDim() > 0
	if recurrent {
		if err := l.seq.check(seg, agent.StateDim(), cfg.NumMinibatches); err != nil {
			return nil, err
		}
		if len(l.envInds) != seg.N {
			l.envInds = make([]int, seg.N)
			for i := range l.envInds {
				l.envInds[i] = i
			}
		}
	}
	for epoch := 0; epoch < cfg.UpdateEpochs; epoch++ {
		if recurrent {
			l.rMB.Shuffle(len(l.envInds), func(i, j int) { l.envInds[i], l.envInds[j] = l.envInds[j], l.envInds[i] })
		} else {
			l.rMB.Shuffle(len(bInds), swap)
		}
		if l.red != nil && cfg.NormAdv {
			if err := l.unionNorm(ctx, bInds, mbSize); err != nil {
				return nil, err
			}
		}
		for k, start := 0, 0; start < batchSize; k, start = k+1, start+mbSize {
			inds := bInds[start : start+mbSize]
			if recurrent {
				epb := seg.N / cfg.NumMinibatches
				inds = l.seq.gather(seg, l.envInds[k*epb:(k+1)*epb])
				agent.SetSequences(seg.T, epb, l.seq.state, l.seq.starts)
			}
			l.mb.gather(seg, l.Adv, l.Returns, inds)
			if l.red != nil && cfg.NormAdv {
				l.mb.unionMean, l.mb.unionStd, l.mb.union = l.norm[k][0], l.norm[k][1], true
			}
			if vn, ok := loss.vn.(*onpolicy.ValueNorm); ok {
				vn.Update(l.mb.returns) // before the loss, as MAPPO's cal_value_loss
			}
			l.GoBehind()
			update(agent, loss, l.mb)
			l.ComeBack()
			if l.red != nil {
				if err := l.reduce(ctx, params); err != nil {
					return nil, err
				}
			}
			if cfg.MaxGradNorm > 0 {
				nn.ClipGradNorm(params, cfg.MaxGradNorm)
			}
			l.Step()
		}
		// Early stop on the last minibatch's approx KL (CleanRL), over
		// all learners' rows when data-parallel.
		if cfg.TargetKL > 0 {
			kl := loss.approxKL
			if l.red != nil {
				x := []float64{kl}
				if err := l.red.Sum(ctx, x); err != nil {
					return nil, err
				}
				kl = x[0] / float64(l.red.Learners())
			}
			if kl > cfg.TargetKL {
				break
			}
		}
	}
	l.Fold(seg)
	return []algo.Stat{
		{Name: "charts/learning_rate", Value: float64(opt.LR())},
		{Name: "losses/value_loss", Value: loss.vLoss},
		{Name: "losses/policy_loss", Value: loss.pgLoss},
		{Name: "losses/entropy", Value: loss.entropy},
		{Name: "losses/old_approx_kl", Value: loss.oldApproxKL},
		{Name: "losses/approx_kl", Value: loss.approxKL},
		{Name: "losses/clipfrac", Value: loss.clipFracSum / float64(loss.minibatches)},
		{Name: "losses/explained_variance", Value: onpolicy.ExplainedVariance(seg.Values, l.Returns)},
	}, nil
}

// MarshalLearnerState saves what PPO's learner carries from one Learn to
// the next besides onpolicy's Learner (onpolicy.LearnerState): the
// minibatch stream and the orders each epoch shuffles in place — the rows,
// and a recurrent agent's envs — and with norm_reward each env's
// discounted return so far.
func (l *learner) MarshalLearnerState() ([]byte, error) {
	b, err := l.mbSrc.MarshalBinary()
	if err != nil {
		return nil, err
	}
	b = append([]byte{byte(len(b))}, b...)
	for _, inds := range [][]int{l.bInds, l.envInds} {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(inds)))
		for _, i := range inds {
			b = binary.LittleEndian.AppendUint32(b, uint32(i))
		}
	}
	if rn := l.Agent.RNorm; rn != nil {
		b = append(b, rn.MarshalBinary()...)
	}
	return b, nil
}

// UnmarshalLearnerState restores what MarshalLearnerState saved.
func (l *learner) UnmarshalLearnerState(b []byte) error {
	bad := fmt.Errorf("%w: ppo: a learner state of %d bytes is malformed", algo.ErrCheckpoint, len(b))
	if len(b) < 1 || len(b) < 1+int(b[0])+8 {
		return bad
	}
	if err := l.mbSrc.UnmarshalBinary(b[1 : 1+b[0]]); err != nil {
		return fmt.Errorf("ppo: %w", err)
	}
	b = b[1+b[0]:]
	var orders [2][]int
	for o := range orders {
		if o == 1 && len(b) == 0 {
			break // saved before the env order was: a stateless agent's
		}
		if len(b) < 4 {
			return bad
		}
		n := int(binary.LittleEndian.Uint32(b))
		if b = b[4:]; len(b) < 4*n {
			return bad
		}
		inds := make([]int, n)
		for k := range inds {
			inds[k] = int(binary.LittleEndian.Uint32(b[4*k:]))
			if inds[k] >= n {
				return bad
			}
		}
		orders[o], b = inds, b[4*n:]
	}
	if rn := l.Agent.RNorm; rn != nil {
		if err := rn.UnmarshalBinary(b); err != nil {
			return fmt.Errorf("%w: ppo: %w", algo.ErrCheckpoint, err)
		}
	} else if len(b) != 0 {
		return bad
	}
	l.bInds, l.envInds = orders[0], orders[1]
	return nil
}

// SetReducer makes the learner one of the r.Learners() data-parallel
// learners (algo.DataParallel). Each Learn call is then one update on the
// union of the learners' segments: every minibatch step averages the
// learners' gradients (algo.AverageGrads in learner-id order) before the
// grad-norm clip and the Adam step, which every learner takes alike; with
// norm_adv the advantages of a minibatch are normalised by the mean and
// std of all learners' rows of it (two Sums per epoch, one for the means
// and one for the squared deviations, as NormalizeTo computes them); the
// target_kl stop looks at the learners' mean KL estimate. The learning
// rate anneals over the run's updates, steps / (M × num_envs × num_steps).
//
// With equal shares (each learner's rows are a minibatch of the same
// size), the average of the learners' mean gradients is the mean gradient
// of the union minibatch: the result equals the single learner's on that
// union up to float summation order (TestDataParallelGradIsUnionGrad).
// With M = 1 Learn is the plain Learn bit for bit
// (TestDataParallelOneIsLearn).
func (l *learner) SetReducer(r algo.Reducer) error {
	if r == nil || r.Learners() < 1 {
		return fmt.Errorf("%w: ppo: no reducer", algo.ErrConfig)
	}
	if l.cfg.IsRecurrent() {
		return fmt.Errorf("%w: ppo: a recurrent core with data-parallel learners: minibatches of whole env sequences are not split across learners", algo.ErrConfig)
	}
	if l.cfg.ValueNorm {
		return fmt.Errorf("%w: ppo: value_norm with data-parallel learners: each would keep statistics of its own rows", algo.ErrConfig)
	}
	l.red = r
	l.Iterations = max(1, l.iterations/r.Learners())
	// A view: reduce points its parts at the parameters' gradients.
	n := len(l.Agent.Params())
	l.g = &algo.Grad{Parts: make([][]float32, n), Has: make([]int, n), Steps: make([]int, n)}
	return nil
}

// unionNorm fills l.norm with each minibatch's advantage mean and std over
// all learners' rows of it.
func (l *learner) unionNorm(ctx context.Context, bInds []int, mbSize int) error {
	k := len(bInds) / mbSize
	n := mbSize * l.red.Learners()
	l.sums = slices.Grow(l.sums[:0], k)[:k]
	if len(l.norm) != k {
		l.norm = make([][2]float64, k)
	}
	adv := l.Adv
	for j := range k {
		var s float64
		for _, i := range bInds[j*mbSize : (j+1)*mbSize] {
			s += float64(adv[i])
		}
		l.sums[j] = s
	}
	if err := l.red.Sum(ctx, l.sums); err != nil {
		return err
	}
	for j := range k {
		mean := l.sums[j] / float64(n)
		l.norm[j][0] = mean
		var ss float64
		for _, i := range bInds[j*mbSize : (j+1)*mbSize] {
			d := float64(adv[i]) - mean
			ss += d * d
		}
		l.sums[j] = ss
	}
	if err := l.red.Sum(ctx, l.sums); err != nil {
		return err
	}
	for j := range k {
		l.norm[j][1] = onpolicy.Std(l.sums[j], n)
	}
	return nil
}

// reduce replaces the agent's gradients by the learners' average, in
// place: l.g's parts are the parameters' own gradient buffers, so the
// exchange costs no copies beyond the Reducer's.
func (l *learner) reduce(ctx context.Context, params []*nn.Param) error {
	if len(params) != len(l.g.Parts) {
		return fmt.Errorf("%w: ppo: %d parameters for a gradient of %d parts", algo.ErrGradShape, len(params), len(l.g.Parts))
	}
	for i, p := range params {
		l.g.Parts[i] = p.Grad
		l.g.Has[i], l.g.Steps[i] = 1, 1
	}
	l.g.N = 1
	if err := l.red.AverageGrad(ctx, l.g); err != nil {
		return fmt.Errorf("ppo: %w", err)
	}
	return nil
}

// Minibatch is the rows of one minibatch, num_envs × num_steps /
// num_minibatches (algo.Minibatcher).
func (c *Config) Minibatch() int {
	if c.NumMinibatches < 1 {
		return 0
	}
	return c.NumEnvs * c.NumSteps / c.NumMinibatches
}

// WithMinibatch returns a copy of the config with minibatches of n rows
// (num_minibatches = num_envs × num_steps / n): data-parallel learners
// each take a share of the minibatch, as pal's sync learners do.
func (c *Config) WithMinibatch(n int) algo.Config {
	d := *c
	if n >= 1 {
		d.NumMinibatches = c.NumEnvs * c.NumSteps / n
	}
	return &d
}

// update computes PPO's loss on one minibatch and accumulates its gradient
// into the agent's parameters (CleanRL ppo.py, "Optimizing the policy and
// value network"):
//
//	ratio   = exp(log π(a|s) − log π_old(a|s))
//	L_pg    = mean(max(−Â·ratio, −Â·clip(ratio, 1−ε, 1+ε)))
//	L_v     = ½·mean(max((V−R)², (V_old + clip(V−V_old, −ε, ε) − R)²))   (clip_vloss)
//	L       = L_pg − c_ent·mean(H) + c_vf·L_v
//
// The policy terms depend only on the actor and the value term only on the
// critic, so Agent.Learn computes the two halves side by side (policyLoss,
// valueLoss), each writing its gradient per row with the 1/B of the mean.
func update(agent *onpolicy.Agent, l *losses, mb *minibatch) {
	agent.Learn(mb.obs, mb.actions, mb.size, l.policy, l.value)
}

// losses holds the two halves of PPO's loss as method values bound once
// (so that update does not allocate) and the statistics CleanRL logs: the
// last minibatch's losses and KL estimates, and the clip fraction over all
// minibatches.
type losses struct {
	cfg           *Config
	mb            *minibatch
	policy        onpolicy.PolicyLoss
	value         onpolicy.ValueLoss
	pgLoss, vLoss float64
	entropy       float64
	oldApproxKL   float64
	approxKL      float64
	clipFracSum   float64
	minibatches   int
	// vn is the agent's target normalization (nil without value_norm or
	// norm_reward); mean0 and std0 its statistics when the segment was
	// gathered.
	vn          critic
	mean0, std0 float32
	eps         float32 // the clip range of this update (AnnealClip)
}

// critic is a normalization of the critic's targets: ValueNorm (updated
// per minibatch) or RewardNorm (a scale fixed within an update).
type critic interface {
	MeanStd() (mean, std float32)
}

func newLosses(cfg *Config, mb *minibatch) *losses {
	l := &losses{cfg: cfg, mb: mb, eps: cfg.ClipCoef}
	l.policy, l.value = l.policyLoss, l.valueLoss
	return l
}

// reset clears the per-iteration statistics.
func (l *losses) reset() { l.clipFracSum, l.minibatches = 0, 0 }

// policyLoss: the clipped surrogate and the entropy bonus.
// dL/dlog π = −Â·ratio/B where the unclipped term is the max (the clipped
// one is flat in π), dL/dH = −c_ent/B.
func (l *losses) policyLoss(dLogProb, dEntropy, newLogProb, entropy []float32) {
	mb, cfg := l.mb, l.cfg
	B := len(newLogProb)
	adv := mb.adv
	switch {
	case cfg.NormAdv && mb.union:
		adv = onpolicy.NormalizeWith(mb.normAdv, mb.adv, mb.unionMean, mb.unionStd)
	case cfg.NormAdv:
		adv = onpolicy.NormalizeTo(mb.normAdv, mb.adv)
	}
	invB := 1 / float32(B)
	eps := l.eps
	var pgLoss, entSum, oldKL, kl float64
	clipped := 0
	for r := range B {
		logRatio := newLogProb[r] - mb.logProb[r]
		ratio := float32(math.Exp(float64(logRatio)))
		oldKL += float64(-logRatio)
		kl += float64((ratio - 1) - logRatio)
		if ratio-1 > eps || 1-ratio > eps {
			clipped++
		}
		// The pessimistic (max) of the two surrogate losses.
		pg1 := -adv[r] * ratio
		pg2 := -adv[r] * min(max(ratio, 1-eps), 1+eps)
		if pg1 >= pg2 {
			pgLoss += float64(pg1)
			dLogProb[r] = -adv[r] * ratio * invB // d ratio / d log π = ratio
		} else {
			pgLoss += float64(pg2)
			dLogProb[r] = 0
		}
		// Entropy bonus.
		entSum += float64(entropy[r])
		dEntropy[r] = -cfg.EntCoef * invB
	}
	n := float64(B)
	l.pgLoss, l.entropy = pgLoss/n, entSum/n
	l.oldApproxKL, l.approxKL = oldKL/n, kl/n
	l.clipFracSum += float64(clipped) / n
	l.minibatches++
}

// valueLoss: ½·(V−R)², or with clip_vloss the max of that and the clipped
// version. dL/dV = c_vf·(V−R)/B, or c_vf·(V_clipped−R)/B when the clipped
// term is the max and V−V_old is inside the clip range (else 0).
func (l *losses) valueLoss(dValue, newValue []float32) {
	mb, cfg := l.mb, l.cfg
	if cfg.HuberDelta > 0 || l.vn != nil {
		l.valueLossMAPPO(dValue, newValue)
		return
	}
	B := len(newValue)
	invB := 1 / float32(B)
	eps := l.eps
	var vLoss float64
	for r := range B {
		v, ret := newValue[r], mb.returns[r]
		vUnclipped := (v - ret) * (v - ret)
		if !cfg.ClipVLoss {
			vLoss += float64(vUnclipped)
			dValue[r] = cfg.VFCoef * (v - ret) * invB
			continue
		}
		dv := v - mb.values[r]
		vClip := mb.values[r] + min(max(dv, -eps), eps)
		vClipped := (vClip - ret) * (vClip - ret)
		switch {
		case vUnclipped >= vClipped:
			vLoss += float64(vUnclipped)
			dValue[r] = cfg.VFCoef * (v - ret) * invB
		case dv > -eps && dv < eps:
			vLoss += float64(vClipped)
			dValue[r] = cfg.VFCoef * (vClip - ret) * invB
		default:
			vLoss += float64(vClipped)
			dValue[r] = 0 // the clipped value is flat in V
		}
	}
	l.vLoss = 0.5 * vLoss / float64(B)
}

// valueLossMAPPO is MAPPO's value loss (the authors' cal_value_loss):
// with value_norm the target and the old value are taken to the critic's
// normalized space, R̃ = (R − μ)/σ with the statistics just updated and
// ṽ_old = (V_old − μ₀)/σ₀ with those the segment was gathered with; the
// error e = v − R̃ (and, with clip_vloss, e_clip = ṽ_old + clip(v − ṽ_old,
// −ε, ε) − R̃, the loss the max of the two) goes through ℓ(e) = ½e², or
// with huber_delta δ > 0 the Huber loss ℓ(e) = ½e² for |e| ≤ δ, else
// δ·(|e| − ½δ). L_v = mean ℓ, and dL/dv = c_vf·ℓ'(e)/B on the chosen term
// (0 when the clipped term is chosen and v − ṽ_old is outside the clip).
func (l *losses) valueLossMAPPO(dValue, newValue []float32) {
	mb, cfg := l.mb, l.cfg
	B := len(newValue)
	invB := 1 / float32(B)
	eps, delta := l.eps, cfg.HuberDelta
	loss := func(e float32) (float32, float32) {
		if a := float32(math.Abs(float64(e))); delta > 0 && a > delta {
			return delta * (a - delta/2), float32(math.Copysign(float64(delta), float64(e)))
		}
		return e * e / 2, e
	}
	var mean, std float32 = 0, 1
	if l.vn != nil {
		mean, std = l.vn.MeanStd()
	}
	var vLoss float64
	for r := range B {
		v, ret, old := newValue[r], (mb.returns[r]-mean)/std, mb.values[r]
		if l.vn != nil {
			old = (old - l.mean0) / l.std0
		}
		lu, gu := loss(v - ret)
		if !cfg.ClipVLoss {
			vLoss += float64(lu)
			dValue[r] = cfg.VFCoef * gu * invB
			continue
		}
		dv := v - old
		lc, gc := loss(old + min(max(dv, -eps), eps) - ret)
		switch {
		case lu >= lc:
			vLoss += float64(lu)
			dValue[r] = cfg.VFCoef * gu * invB
		case dv > -eps && dv < eps:
			vLoss += float64(lc)
			dValue[r] = cfg.VFCoef * gc * invB
		default:
			vLoss += float64(lc)
			dValue[r] = 0
		}
	}
	l.vLoss = vLoss / float64(B)
}

// minibatch holds one minibatch gathered from the flattened segment
// (CleanRL b_obs[mb_inds] …).
type minibatch struct {
	size                                   int
	obsDim, actDim                         int
	obs, actions                           []float32
	logProb, adv, normAdv, returns, values []float32
	// union: normalise the advantages by unionMean and unionStd (all
	// data-parallel learners' rows of this minibatch), not by these rows'.
	union               bool
	unionMean, unionStd float64
}

func newMinibatch(obsDim, actDim int) *minibatch {
	return &minibatch{obsDim: obsDim, actDim: actDim}
}

// resize sizes the minibatch for size rows (allocating only when it grows).
func (mb *minibatch) resize(size int) {
	if size == mb.size {
		return
	}
	f := func(n int) []float32 { return make([]float32, n) }
	mb.size = size
	mb.obs, mb.actions = f(size*mb.obsDim), f(size*mb.actDim)
	mb.logProb, mb.adv, mb.normAdv, mb.returns, mb.values = f(size), f(size), f(size), f(size), f(size)
}

// gather copies the rows inds of the segment, its advantages and returns
// into the minibatch.
func (mb *minibatch) gather(seg *sample.Segment, adv, returns []float32, inds []int) {
	od, ad := mb.obsDim, mb.actDim
	for r, k := range inds {
		copy(mb.obs[r*od:(r+1)*od], seg.Obs[k*od:(k+1)*od])
		copy(mb.actions[r*ad:(r+1)*ad], seg.Actions[k*ad:(k+1)*ad])
		mb.logProb[r] = seg.LogProbs[k]
		mb.adv[r] = adv[k]
		mb.returns[r] = returns[k]
		mb.values[r] = seg.Values[k]
	}
}

// sequences is one minibatch of whole env sequences (CleanRL
// ppo_atari_lstm: envsperbatch = num_envs / num_minibatches envs, all T
// steps of each): the rows in time-major order, each env's state at the
// segment's start, and where an episode starts inside the segment.
type sequences struct {
	inds   []int
	state  []float32
	starts []bool
}

// check reports a segment a recurrent learner cannot re-run: no state
// for each env, or envs that num_minibatches does not divide.
func (s *sequences) check(seg *sample.Segment, stateDim, minibatches int) error {
	if err := onpolicy.CheckState("ppo", seg, stateDim); err != nil {
		return err
	}
	if seg.N%minibatches != 0 {
		return fmt.Errorf("%w: ppo: num_minibatches (%d) must divide the segment's %d envs (each minibatch is whole env sequences)", sample.ErrShape, minibatches, seg.N)
	}
	return nil
}

// gather selects envs' sequences of seg and returns their rows t·N + e
// (t-major, envs in the given order). Env e starts an episode at step t
// > 0 where its step t−1 was done; at t = 0 its stored state is already
// the zero state where the previous segment's last step was done.
func (s *sequences) gather(seg *sample.Segment, envs []int) []int {
	b := len(envs)
	sd := len(seg.State) / seg.N
	s.inds = slices.Grow(s.inds[:0], seg.T*b)[:seg.T*b]
	s.state = scratch.Resize(s.state, b*sd)
	if cap(s.starts) < seg.T*b {
		s.starts = make([]bool, seg.T*b)
	}
	s.starts = s.starts[:seg.T*b]
	for j, e := range envs {
		copy(s.state[j*sd:(j+1)*sd], seg.State[e*sd:(e+1)*sd])
	}
	for t := range seg.T {
		for j, e := range envs {
			s.inds[t*b+j] = t*seg.N + e
			s.starts[t*b+j] = t > 0 && seg.Dones[(t-1)*seg.N+e] != 0
		}
	}
	return s.inds
}

// Networks lists the actor and the critic (algo.Networker), trained with
// Adam.
func (c *Config) Networks(obs, act env.Space) []algo.Network {
	return onpolicy.Networks(obs, act, c.agentConfig(), false)
}
