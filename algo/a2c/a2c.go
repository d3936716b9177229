package a2c

import (
	"context"
	"errors"
	"fmt"

	"herd/algo"
	"herd/algo/internal/onpolicy"
	"herd/env"
	"herd/nn"
	"herd/sample"
)

// ---------------------------------------------------------------------------
// 1. Config (Stable-Baselines3 A2C; defaults are SB3's)
// ---------------------------------------------------------------------------

// Config holds A2C's settings. Defaults are Stable-Baselines3's A2C, whose
// names the yaml keys follow; the rl-baselines3-zoo CartPole setting only
// changes num_envs to 8 and ent_coef to 0 (configs/a2c-cartpole.yaml).
type Config struct {
	// Rollout.
	NumEnvs  int `yaml:"num_envs"`  // parallel envs; default 1
	NumSteps int `yaml:"num_steps"` // steps per env per update (SB3 n_steps); default 5

	// Optimisation: RMSprop (SB3 use_rms_prop) or Adam.
	LearningRate float32 `yaml:"learning_rate"` // step size; default 7e-4
	AnnealLR     bool    `yaml:"anneal_lr"`     // anneal the LR linearly to 0; default false
	UseRMSProp   bool    `yaml:"use_rms_prop"`  // RMSprop (α 0.99) instead of Adam; default true
	RMSPropEps   float32 `yaml:"rms_prop_eps"`  // optimizer ε; default 1e-5
	MaxGradNorm  float32 `yaml:"max_grad_norm"` // global grad-norm clip, 0 = off; default 0.5

	// Objective.
	Gamma     float32 `yaml:"gamma"`      // discount γ; default 0.99
	GAELambda float32 `yaml:"gae_lambda"` // λ; 1 = plain n-step returns; default 1
	NormAdv   bool    `yaml:"norm_adv"`   // normalise advantages per update; default false
	EntCoef   float32 `yaml:"ent_coef"`   // entropy bonus coefficient; default 0
	VFCoef    float32 `yaml:"vf_coef"`    // value loss coefficient; default 0.5

	// Networks (SB3 MlpPolicy: separate 64-64 tanh actor and critic).
	// Encoder is the networks' input stage: mlp (flat observations) or
	// minatar / nature / impala (image observations, a Box [height, width,
	// channels]: that preset's convolutions or, for impala, the paper's
	// residual stages, then hidden ReLU layers, in the actor and in the
	// critic). Default mlp.
	Encoder    string  `yaml:"encoder"`
	Hidden     []int   `yaml:"hidden"`       // hidden widths; default [64, 64]
	Activation string  `yaml:"activation"`   // hidden activation; default tanh
	OrthoInit  bool    `yaml:"ortho_init"`   // orthogonal init (gains √2, 0.01, 1); default true
	InitLogStd float32 `yaml:"init_log_std"` // Gaussian log-std at start (Box actions); default 0

	// SharedEncoder gives the actor and the critic one encoder (the
	// convolutions and the hidden ReLU layers) and a linear head each,
	// CleanRL's ppo_atari.py Agent; the heads' gradients add up in it.
	// Needs a convolutional encoder. Default false (separate networks).
	SharedEncoder bool `yaml:"shared_encoder,omitempty"`

	// Execution.
	Parallel bool `yaml:"parallel"` // actor and critic passes on two goroutines (same results); default true
	// DelayedGradient: a segment gathered one version behind the learner
	// (the HTS executor) has its gradient evaluated at the behaviour
	// parameters θ_{k−1} and applied to θ_k (HTS-RL Eq. 6); false
	// evaluates it at θ_k (HTS-RL Eq. 5, the stale-policy gradient).
	// Changes nothing when there is no lag (the local executor). Default
	// true.
	DelayedGradient bool `yaml:"delayed_gradient"`
}

// DefaultConfig returns SB3's A2C defaults.
func DefaultConfig() Config {
	return Config{
		NumEnvs: 1, NumSteps: 5,
		LearningRate: 7e-4, UseRMSProp: true, RMSPropEps: 1e-5, MaxGradNorm: 0.5,
		Gamma: 0.99, GAELambda: 1, EntCoef: 0, VFCoef: 0.5,
		Hidden: []int{64, 64}, Activation: "tanh", OrthoInit: true, Encoder: "mlp",
		Parallel: true, DelayedGradient: true,
	}
}

// Validate reports every problem with the config, given the run header.
func (c *Config) Validate(h algo.Header) error {
	p := algo.Problems{Name: "a2c"}
	onpolicy.Common{NumEnvs: c.NumEnvs, NumSteps: c.NumSteps, LearningRate: c.LearningRate,
		MaxGradNorm: c.MaxGradNorm, Gamma: c.Gamma, GAELambda: c.GAELambda, EntCoef: c.EntCoef, VFCoef: c.VFCoef,
		Hidden: c.Hidden, Activation: c.Activation, Encoder: c.Encoder, SharedEncoder: c.SharedEncoder}.Check(p.Add, h)
	if !(c.RMSPropEps > 0) {
		p.Add("rms_prop_eps must be > 0, got %v", c.RMSPropEps)
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
	return onpolicy.AgentConfig{Encoder: c.Encoder, SharedEncoder: c.SharedEncoder, Hidden: c.Hidden, Act: act, OrthoInit: c.OrthoInit, InitLogStd: c.InitLogStd,
		Parallel: c.Parallel}
}

// Scalars are the metrics A2C reports.
func Scalars() []string {
	return []string{"charts/learning_rate", "losses/value_loss", "losses/policy_loss", "losses/entropy",
		"losses/explained_variance"}
}

// Spec describes A2C to the CLI (algo/all).
func Spec() algo.Spec {
	return algo.Spec{
		Name:       "a2c",
		Can:        algo.CanSegmentLearner | algo.CanGradApply | algo.CanAgentRows | algo.CanStatelessPolicy | algo.CanCarriedState,
		Doc:        "Advantage Actor-Critic (synchronous, n-step returns), discrete and continuous actions",
		Scalars:    Scalars(),
		NewConfig:  func() algo.Config { c := DefaultConfig(); return &c },
		Train:      onpolicy.TrainFunc("a2c", Train),
		LoadPolicy: LoadPolicy,
		Pieces:     onpolicy.PiecesFunc("a2c", Pieces),
		Resumable:  true,
	}
}

// LoadPolicy rebuilds the deterministic policy from a checkpoint.
func LoadPolicy(path string, h algo.Header, c algo.Config) (algo.Policy, error) {
	return onpolicy.LoadPolicy("a2c", path, h, c, (*Config).agentConfig)
}

// ---------------------------------------------------------------------------
// 2. Pieces: onpolicy's policy (separate actor and critic MLPs, rows
// [logits or μ, log σ | V(s)]) and sampler, shared with PPO; A2C's learner
// (below): one gradient step per segment.
// ---------------------------------------------------------------------------

// Pieces cuts A2C into the policy, sampler and learner of a run on spaces
// sp, for any executor.
func Pieces(h algo.Header, cfg *Config, sp algo.Spaces) (*algo.Pieces, error) {
	if err := errors.Join(h.Validate(), cfg.Validate(h)); err != nil {
		return nil, err
	}
	return onpolicy.NewPieces("a2c", h, sp, cfg.agentConfig(), func() (algo.SegmentLearner, error) {
		return newLearner(h, cfg, sp)
	})
}

// ---------------------------------------------------------------------------
// 3. Train: the local executor (onpolicy.TrainLocal)
// ---------------------------------------------------------------------------

// Train runs synchronous A2C (Mnih et al. 2016, "Asynchronous Methods for
// Deep Reinforcement Learning", in its synchronous form; SB3's A2C.train)
// on rt.Header.Env for rt.Header.Steps environment steps: per iteration
// one rollout of NumSteps × NumEnvs transitions with the policy and the
// sampler, then one update on it (learner.Learn). On cancellation of ctx
// it stops between updates and returns the agent trained so far with
// ctx.Err().
func Train(ctx context.Context, rt *algo.Runtime, cfg *Config) (*onpolicy.Agent, error) {
	h := rt.Header
	if err := errors.Join(h.Validate(), cfg.Validate(h)); err != nil {
		return nil, err
	}
	return onpolicy.TrainLocal(ctx, rt, "a2c", onpolicy.Local{NumEnvs: cfg.NumEnvs, NumSteps: cfg.NumSteps, Gamma: cfg.Gamma},
		func(sp algo.Spaces) (*algo.Pieces, error) { return Pieces(h, cfg, sp) })
}

// ---------------------------------------------------------------------------
// 4. Learn: one update on a segment
// ---------------------------------------------------------------------------

// learner is A2C's algo.SegmentLearner. Each Learn is one gradient step on
// the whole segment:
//
//	Â     = GAE(γ, λ)            (λ = 1: n-step returns minus V)
//	L_pg  = −mean(Â · log π(a|s))
//	L_v   = mean((R − V(s))²)     (SB3: F.mse_loss, no ½)
//	L     = L_pg − c_ent·mean(H) + c_vf·L_v
type learner struct {
	*onpolicy.Learner // agent, RMSprop or Adam, GAE buffers, versions
	cfg               *Config
	loss              *losses
	policyLoss        onpolicy.PolicyLoss // the loss halves, bound once: no allocation per update
	valueLoss         onpolicy.ValueLoss
}

func newLearner(h algo.Header, cfg *Config, sp algo.Spaces) (*learner, error) {
	opt, err := onpolicy.NewOptimizer(cfg.UseRMSProp, cfg.LearningRate, cfg.RMSPropEps)
	if err != nil {
		return nil, fmt.Errorf("a2c: %w", err)
	}
	numIterations := int(h.Steps / int64(cfg.NumEnvs*cfg.NumSteps))
	base, err := onpolicy.NewLearner("a2c", h, sp, cfg.agentConfig(), opt, numIterations, cfg.Gamma, cfg.GAELambda)
	if err != nil {
		return nil, err
	}
	base.Delayed = cfg.DelayedGradient
	l := &learner{Learner: base, cfg: cfg, loss: &losses{cfg: cfg}}
	l.policyLoss, l.valueLoss = l.loss.policyLoss, l.loss.valueLoss
	return l, nil
}

// Learn runs one A2C update on seg and returns its scalars.
func (l *learner) Learn(ctx context.Context, seg *sample.Segment) ([]algo.Stat, error) {
	// Advantages and returns (truncations were bootstrapped by the env worker).
	iteration, err := l.Begin(ctx, seg)
	if err != nil {
		return nil, err
	}
	cfg, agent, opt, loss := l.cfg, l.Agent, l.Opt, l.loss
	params := agent.Params()
	batchSize := seg.T * seg.N
	if cfg.AnnealLR {
		opt.SetLR(nn.LinearSchedule(cfg.LearningRate, 0, iteration-1, l.Iterations))
	}
	loss.returns = l.Returns
	loss.adv = append(loss.adv[:0], l.Adv...)
	if cfg.NormAdv {
		onpolicy.NormalizeTo(loss.adv, l.Adv)
	}

	// One gradient step on the whole rollout: the policy and value halves
	// of the loss run side by side (Agent.Learn), at the behaviour
	// parameters when the segment lags one version (GoBehind).
	agent.Reserve(batchSize)
	l.GoBehind()
	agent.Learn(seg.Obs, seg.Actions, batchSize, l.policyLoss, l.valueLoss)
	l.ComeBack()
	if cfg.MaxGradNorm > 0 {
		nn.ClipGradNorm(params, cfg.MaxGradNorm)
	}
	opt.Step(params)

	return []algo.Stat{
		{Name: "charts/learning_rate", Value: float64(opt.LR())},
		{Name: "losses/value_loss", Value: loss.vLoss},
		{Name: "losses/policy_loss", Value: loss.pgLoss},
		{Name: "losses/entropy", Value: loss.entropy},
		{Name: "losses/explained_variance", Value: onpolicy.ExplainedVariance(seg.Values, l.Returns)},
	}, nil
}

// losses holds A2C's loss halves (passed to Agent.Learn), their inputs and
// the statistics of the last update.
type losses struct {
	cfg                    *Config
	adv                    []float32 // advantages, normalised if norm_adv
	returns                []float32 // the critic's targets
	pgLoss, vLoss, entropy float64
}

// policyLoss: L_pg − c_ent·mean(H), so dL/dlog π = −Â/B and dL/dH = −c_ent/B.
func (l *losses) policyLoss(dLogProb, dEntropy, logProb, entropy []float32) {
	l.pgLoss, l.entropy = onpolicy.PolicyGradient(dLogProb, dEntropy, l.adv, logProb, entropy, l.cfg.EntCoef)
}

// valueLoss: c_vf·mean((V − R)²), so dL/dV = 2·c_vf·(V − R)/B.
func (l *losses) valueLoss(dValue, value []float32) {
	B := len(value)
	invB := 1 / float32(B)
	var vLoss float64
	for r := range B {
		d := value[r] - l.returns[r]
		vLoss += float64(d * d)
		dValue[r] = l.cfg.VFCoef * 2 * d * invB
	}
	l.vLoss = vLoss / float64(B)
}

// Networks lists the actor and the critic (algo.Networker).
func (c *Config) Networks(obs, act env.Space) []algo.Network {
	return onpolicy.Networks(obs, act, c.agentConfig(), c.UseRMSProp)
}
