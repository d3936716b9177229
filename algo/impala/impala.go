package impala

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"herd/algo"
	"herd/algo/internal/onpolicy"
	"herd/env"
	"herd/internal/scratch"
	"herd/nn"
	"herd/sample"
)

// ---------------------------------------------------------------------------
// 1. Config
// ---------------------------------------------------------------------------

// Config holds IMPALA's settings. The loss and the V-trace truncation are
// the paper's (Espeholt et al. 2018); sizes, optimizer and coefficients
// suit CartPole-sized MLP tasks.
type Config struct {
	// Rollout.
	NumEnvs  int `yaml:"num_envs"`  // envs in all, spread over runtime.env_workers workers; default 8
	NumSteps int `yaml:"num_steps"` // unroll length T of a segment; default 32
	NumAsync int `yaml:"num_async"` // segments in flight per worker (GatherAsync); default 2
	// MaxPolicyLag bounds the versions the learner may have taken since
	// a segment's policy when it learns on it (algo.AsyncPlan); at
	// least num_async × env_workers − 1, and 0 means that least bound,
	// under which segments are learned in the order they were requested.
	MaxPolicyLag int `yaml:"max_policy_lag"` // default 0

	// Optimisation.
	LearningRate float32 `yaml:"learning_rate"` // step size; default 1e-3
	AnnealLR     bool    `yaml:"anneal_lr"`     // anneal the LR linearly to 0 over the run's env steps (the paper's schedule); default true
	UseRMSProp   bool    `yaml:"use_rms_prop"`  // RMSprop (α 0.99, as the paper) instead of Adam; default false
	OptEps       float32 `yaml:"opt_eps"`       // optimizer ε; default 1e-5
	MaxGradNorm  float32 `yaml:"max_grad_norm"` // global grad-norm clip, 0 = off; default 0.5

	// Objective.
	Gamma   float32 `yaml:"gamma"`    // discount γ; default 0.99
	RhoBar  float32 `yaml:"rho_bar"`  // ρ̄, truncation of the importance weight in δ and A; default 1
	CBar    float32 `yaml:"c_bar"`    // c̄, truncation of the trace cutting; default 1
	Lambda  float32 `yaml:"lambda"`   // λ of the traces, c_t = λ·min(c̄, π/μ) (the paper's Remark 2); default 1
	EntCoef float32 `yaml:"ent_coef"` // entropy bonus coefficient; default 0.01
	VFCoef  float32 `yaml:"vf_coef"`  // baseline loss coefficient; default 0.5

	// Networks (separate actor and critic MLPs, as PPO's and A2C's).
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
	// Recurrent puts an LSTM or GRU between each network's Hidden layers
	// and its head (PPO's recurrent: section): the actors record each
	// segment's starting state per env, and the learner re-runs every
	// env's sequence from it (docs/guide/recurrent.md). Default: none.
	Recurrent onpolicy.RecurrentConfig `yaml:"recurrent,omitempty"`
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		NumEnvs: 8, NumSteps: 32, NumAsync: 2,
		LearningRate: 1e-3, AnnealLR: true, OptEps: 1e-5, MaxGradNorm: 0.5,
		Gamma: 0.99, RhoBar: 1, CBar: 1, Lambda: 1, EntCoef: 0.01, VFCoef: 0.5,
		Hidden: []int{64, 64}, Activation: "tanh", OrthoInit: true, Encoder: "mlp",
	}
}

// Validate reports every problem with the config, given the run header.
func (c *Config) Validate(h algo.Header) error {
	p := algo.Problems{Name: "impala"}
	onpolicy.Common{NumEnvs: c.NumEnvs, NumSteps: c.NumSteps, LearningRate: c.LearningRate,
		MaxGradNorm: c.MaxGradNorm, Gamma: c.Gamma, GAELambda: 1, EntCoef: c.EntCoef, VFCoef: c.VFCoef,
		Hidden: c.Hidden, Activation: c.Activation, Encoder: c.Encoder, Recurrent: c.Recurrent.On()}.Check(p.Add, h)
	c.Recurrent.Check(p.Add)
	if c.Recurrent.On() && c.Encoder != "" && c.Encoder != "mlp" {
		p.Add("a recurrent core takes encoder mlp, got %q", c.Encoder)
	}
	if c.NumAsync < 1 {
		p.Add("num_async must be >= 1, got %d", c.NumAsync)
	}
	if c.MaxPolicyLag < 0 {
		p.Add("max_policy_lag must be >= 0 (0: num_async × env_workers − 1), got %d", c.MaxPolicyLag)
	}
	if !(c.OptEps > 0) {
		p.Add("opt_eps must be > 0, got %v", c.OptEps)
	}
	if !(c.RhoBar > 0) || !(c.CBar > 0) {
		p.Add("rho_bar and c_bar must be > 0, got %v and %v", c.RhoBar, c.CBar)
	}
	if !(c.Lambda >= 0 && c.Lambda <= 1) {
		p.Add("lambda must be in [0, 1], got %v", c.Lambda)
	}
	return p.Err()
}

func (c *Config) agentConfig() onpolicy.AgentConfig {
	act, _ := nn.ParseActivation(c.Activation)
	a := onpolicy.AgentConfig{Encoder: c.Encoder, Hidden: c.Hidden, Act: act, OrthoInit: c.OrthoInit, InitLogStd: c.InitLogStd}
	c.Recurrent.Set(&a)
	return a
}

// Lacks is what a recurrent config cannot do (algo.Limiter): act where
// no one keeps or carries each env's state. The plan's rollout workers
// keep their envs' states in their policy copies, HTS's policy workers
// keep them, dist's env workers carry them.
func (c *Config) Lacks() (algo.Capability, string) { return c.Recurrent.Lacks("impala") }

// Scalars are the metrics IMPALA reports.
func Scalars() []string {
	return []string{"charts/learning_rate", "losses/value_loss", "losses/policy_loss", "losses/entropy",
		"losses/mean_rho", "charts/policy_lag", "charts/policy_lag_max"}
}

// RolloutShape is the envs, the segment length and the discount of the
// truncation bootstrap (algo.Rollout): with it the HTS and dist executors
// run IMPALA's learner on the segments their env workers make, whose lag
// V-trace corrects as it does the plan's.
func (c *Config) RolloutShape() (numEnvs, numSteps int, gamma float32) {
	return c.NumEnvs, c.NumSteps, c.Gamma
}

// PlanSettings names num_async and max_policy_lag when they differ from
// their defaults: only the plan reads them (algo.PlanSettings). Under HTS the
// lag is one update; under dist, runtime.max_policy_lag bounds it.
func (c *Config) PlanSettings() []string {
	d := DefaultConfig()
	var keys []string
	if c.NumAsync != d.NumAsync {
		keys = append(keys, "num_async")
	}
	if c.MaxPolicyLag != d.MaxPolicyLag {
		keys = append(keys, "max_policy_lag")
	}
	return keys
}

// Spec describes IMPALA to the CLI (algo/all). It has no Train of its
// own: the local and flow executors run its plan (AsyncPlan), with the
// workers in-process or served over NATS; HTS and dist place the segment
// learner themselves.
func Spec() algo.Spec {
	return algo.Spec{
		Name:      "impala",
		Can:       algo.CanSegmentLearner | algo.CanBehaviourLogProbs | algo.CanPlan | algo.CanStatelessPolicy | algo.CanCarriedState,
		Resumable: true,
		Doc:       "IMPALA: asynchronous actors, V-trace actor-critic learner (a dataflow plan)",
		Scalars:   Scalars(),
		NewConfig: func() algo.Config {
			c := DefaultConfig()
			return &c
		},
		LoadPolicy: func(path string, h algo.Header, c algo.Config) (algo.Policy, error) {
			return onpolicy.LoadPolicy("impala", path, h, c, (*Config).agentConfig)
		},
		Pieces: onpolicy.PiecesFunc("impala", Pieces),
	}
}

// Pieces cuts IMPALA into the policy and sampler (onpolicy's, as PPO's and
// A2C's: the sampler records the behaviour log-probabilities log μ(a|x)
// per step) and the V-trace learner.
func Pieces(h algo.Header, cfg *Config, sp algo.Spaces) (*algo.Pieces, error) {
	if err := errors.Join(h.Validate(), cfg.Validate(h)); err != nil {
		return nil, err
	}
	return onpolicy.NewPieces("impala", h, sp, cfg.agentConfig(), func() (algo.SegmentLearner, error) {
		return newLearner(h, cfg, sp)
	})
}

// ---------------------------------------------------------------------------
// 2. Plan: actors sample asynchronously, the learner takes segments as
// they arrive, the new weights go to every actor.
// ---------------------------------------------------------------------------

// AsyncPlan is IMPALA as a dataflow plan (RLlib Flow's IMPALA without the
// learner thread's queue; built by flow.AsyncPlan): each worker keeps
// num_async segments in flight, the learner takes one V-trace step per
// segment as they arrive and broadcasts its weights, which a worker picks
// up before its next segment. A segment is learned at most max_policy_lag
// versions after the one it was made with (by default num_async ×
// env_workers − 1): the lag V-trace corrects.
func (c *Config) AsyncPlan() algo.AsyncPlan {
	return algo.AsyncPlan{NumEnvs: c.NumEnvs, NumSteps: c.NumSteps, Gamma: c.Gamma, NumAsync: c.NumAsync, MaxPolicyLag: c.MaxPolicyLag}
}

// ---------------------------------------------------------------------------
// 3. Learn: one V-trace actor-critic step on a segment
// ---------------------------------------------------------------------------

// learner is IMPALA's algo.SegmentLearner. Per segment (B = T·N rows):
//
//	log ρ_t = log π(a_t|x_t) − log μ(a_t|x_t)      (μ: the behaviour policy, recorded by the sampler)
//	v, A    = VTrace(log ρ, r, V(x), d, V(x_T); γ, ρ̄, c̄, λ)   (no gradient through them)
//	L_pg    = −mean(A_t · log π(a_t|x_t))
//	L_v     = ½·mean((v_t − V(x_t))²)
//	L       = L_pg − c_ent·mean(H) + c_vf·L_v
//
// Departure from the paper: means over the batch instead of sums (the
// coefficients then do not depend on T·N), and truncated episodes
// bootstrap from the behaviour critic's V(final observation), folded into
// the reward by the worker as in herd's PPO and A2C.
type learner struct {
	*onpolicy.Learner
	cfg                                    *Config
	steps, totalSteps                      int64 // env steps learned, and the run's
	starts                                 []bool
	logProb, entropy, values, boot, logRho []float32
	vs, adv                                []float32
	pgLoss, vLoss, entMean                 float64
	policyLoss                             onpolicy.PolicyLoss
	valueLoss                              onpolicy.ValueLoss
}

func newLearner(h algo.Header, cfg *Config, sp algo.Spaces) (*learner, error) {
	opt, err := onpolicy.NewOptimizer(cfg.UseRMSProp, cfg.LearningRate, cfg.OptEps)
	if err != nil {
		return nil, fmt.Errorf("impala: %w", err)
	}
	iterations := int(h.Steps / int64(cfg.NumEnvs*cfg.NumSteps))
	base, err := onpolicy.NewLearner("impala", h, sp, cfg.agentConfig(), opt, iterations, cfg.Gamma, 1)
	if err != nil {
		return nil, err
	}
	l := &learner{Learner: base, cfg: cfg, totalSteps: h.Steps}
	l.policyLoss, l.valueLoss = l.policy, l.value
	return l, nil
}

// Learn takes one V-trace step on seg and returns its scalars.
func (l *learner) Learn(ctx context.Context, seg *sample.Segment) ([]algo.Stat, error) {
	iteration, err := l.Begin(ctx, seg) // checks the segment, counts the version
	if err != nil {
		return nil, err
	}
	cfg, agent := l.cfg, l.Agent
	B, N := seg.T*seg.N, seg.N
	lag := float64(iteration-1) - float64(seg.Version) // versions learned since the segment's policy
	for _, b := range []*[]float32{&l.logProb, &l.entropy, &l.values, &l.logRho, &l.vs, &l.adv} {
		*b = scratch.Resize(*b, B)
	}
	l.boot = scratch.Resize(l.boot, N)
	agent.Reserve(B)
	if cfg.AnnealLR {
		// By env steps learned, not by calls: segments arrive from any
		// number of workers.
		l.Opt.SetLR(float32(float64(cfg.LearningRate) * max(0, 1-float64(l.steps)/float64(l.totalSteps))))
	}
	l.steps += int64(B)

	// Current π and V on the segment, then the V-trace targets. A
	// recurrent agent re-runs each env's sequence from the state the
	// actor recorded at the segment's start, zeroed where an episode
	// starts, and bootstraps from the state its last step left.
	sd := agent.StateDim()
	if sd > 0 {
		if err := onpolicy.CheckState("impala", seg, sd); err != nil {
			return nil, err
		}
		l.starts = onpolicy.EpisodeStarts(l.starts, seg)
		agent.SetSequences(seg.T, N, seg.State, l.starts)
	}
	agent.Evaluate(l.logProb, l.entropy, l.values, seg.Obs, seg.Actions, B)
	agent.ValueAfter(l.boot, seg.NextObs, seg.Dones[B-N:], N)
	var rhoSum float64
	for k := range l.logRho {
		l.logRho[k] = l.logProb[k] - seg.LogProbs[k]
		rhoSum += math.Min(float64(cfg.RhoBar), math.Exp(float64(l.logRho[k])))
	}
	VTrace(l.vs, l.adv, l.logRho, seg.Rewards, l.values, seg.Dones, l.boot, N, cfg.Gamma, cfg.RhoBar, cfg.CBar, cfg.Lambda)

	// One gradient step on the whole segment (BPTT over its sequences).
	agent.SetSequences(seg.T, N, seg.State, l.starts)
	agent.Learn(seg.Obs, seg.Actions, B, l.policyLoss, l.valueLoss)
	if cfg.MaxGradNorm > 0 {
		nn.ClipGradNorm(agent.Params(), cfg.MaxGradNorm)
	}
	l.Opt.Step(agent.Params())
	return []algo.Stat{
		{Name: "charts/learning_rate", Value: float64(l.Opt.LR())},
		{Name: "losses/value_loss", Value: l.vLoss},
		{Name: "losses/policy_loss", Value: l.pgLoss},
		{Name: "losses/entropy", Value: l.entMean},
		{Name: "losses/mean_rho", Value: rhoSum / float64(B)},
		{Name: "charts/policy_lag", Value: lag},
	}, nil
}

// policy: L_pg − c_ent·mean(H): dL/dlog π = −A/B, dL/dH = −c_ent/B.
func (l *learner) policy(dLogProb, dEntropy, logProb, entropy []float32) {
	l.pgLoss, l.entMean = onpolicy.PolicyGradient(dLogProb, dEntropy, l.adv, logProb, entropy, l.cfg.EntCoef)
}

// value: c_vf·½·mean((V − v)²): dL/dV = c_vf·(V − v)/B.
func (l *learner) value(dValue, value []float32) {
	B := len(value)
	invB := 1 / float32(B)
	var s float64
	for k := range B {
		d := value[k] - l.vs[k]
		s += float64(d * d)
		dValue[k] = l.cfg.VFCoef * d * invB
	}
	l.vLoss = 0.5 * s / float64(B)
}

// Networks lists the actor and the critic (algo.Networker).
func (c *Config) Networks(obs, act env.Space) []algo.Network {
	return onpolicy.Networks(obs, act, c.agentConfig(), c.UseRMSProp)
}

// MarshalLearnerState saves the env steps learned, which the annealed
// learning rate reads (onpolicy.LearnerState).
func (l *learner) MarshalLearnerState() ([]byte, error) {
	return binary.LittleEndian.AppendUint64(nil, uint64(l.steps)), nil
}

// UnmarshalLearnerState restores what MarshalLearnerState saved.
func (l *learner) UnmarshalLearnerState(b []byte) error {
	if len(b) != 8 {
		return fmt.Errorf("%w: impala: a learner state of %d bytes, want 8", algo.ErrCheckpoint, len(b))
	}
	l.steps = int64(binary.LittleEndian.Uint64(b))
	return nil
}
