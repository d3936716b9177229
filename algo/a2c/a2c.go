package a2c

import (
	"context"
	"errors"
	"fmt"

	"herd/algo"
	"herd/algo/internal/onpolicy"
	"herd/internal/rng"
	"herd/nn"
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
	Hidden     []int   `yaml:"hidden"`       // hidden widths; default [64, 64]
	Activation string  `yaml:"activation"`   // hidden activation; default tanh
	OrthoInit  bool    `yaml:"ortho_init"`   // orthogonal init (gains √2, 0.01, 1); default true
	InitLogStd float32 `yaml:"init_log_std"` // Gaussian log-std at start (Box actions); default 0

	// Execution.
	Parallel bool `yaml:"parallel"` // actor and critic passes on two goroutines (same results); default true
}

// DefaultConfig returns SB3's A2C defaults.
func DefaultConfig() Config {
	return Config{
		NumEnvs: 1, NumSteps: 5,
		LearningRate: 7e-4, UseRMSProp: true, RMSPropEps: 1e-5, MaxGradNorm: 0.5,
		Gamma: 0.99, GAELambda: 1, EntCoef: 0, VFCoef: 0.5,
		Hidden: []int{64, 64}, Activation: "tanh", OrthoInit: true,
		Parallel: true,
	}
}

// Validate reports every problem with the config, given the run header.
func (c *Config) Validate(h algo.Header) error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: a2c: "+format, append([]any{algo.ErrConfig}, args...)...))
	}
	onpolicy.Common{NumEnvs: c.NumEnvs, NumSteps: c.NumSteps, LearningRate: c.LearningRate,
		MaxGradNorm: c.MaxGradNorm, Gamma: c.Gamma, GAELambda: c.GAELambda, EntCoef: c.EntCoef, VFCoef: c.VFCoef,
		Hidden: c.Hidden, Activation: c.Activation}.Check(bad, h)
	if !(c.RMSPropEps > 0) {
		bad("rms_prop_eps must be > 0, got %v", c.RMSPropEps)
	}
	return errors.Join(errs...)
}

func (c *Config) agentConfig() onpolicy.AgentConfig {
	act, _ := nn.ParseActivation(c.Activation)
	return onpolicy.AgentConfig{Hidden: c.Hidden, Act: act, OrthoInit: c.OrthoInit, InitLogStd: c.InitLogStd,
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
		Doc:        "Advantage Actor-Critic (synchronous, n-step returns), discrete and continuous actions",
		Scalars:    Scalars(),
		NewConfig:  func() algo.Config { c := DefaultConfig(); return &c },
		Train:      onpolicy.TrainFunc("a2c", Train),
		LoadPolicy: LoadPolicy,
	}
}

// ---------------------------------------------------------------------------
// 2. Agent: onpolicy.Agent, shared with PPO — separate actor and critic
// MLPs, Categorical or diagonal-Gaussian head.
// ---------------------------------------------------------------------------

// LoadPolicy rebuilds the deterministic policy from a checkpoint.
func LoadPolicy(path string, h algo.Header, c algo.Config) (algo.Policy, error) {
	return onpolicy.LoadPolicy("a2c", path, h, c, (*Config).agentConfig)
}

// ---------------------------------------------------------------------------
// 3. Train
// ---------------------------------------------------------------------------

// Train runs synchronous A2C (Mnih et al. 2016, "Asynchronous Methods for
// Deep Reinforcement Learning", in its synchronous form; SB3's A2C.train)
// on rt.Header.Env for rt.Header.Steps environment steps. Each update uses
// one rollout of NumSteps × NumEnvs transitions, once:
//
//	Â     = GAE(γ, λ)            (λ = 1: n-step returns minus V)
//	L_pg  = −mean(Â · log π(a|s))
//	L_v   = mean((R − V(s))²)     (SB3: F.mse_loss, no ½)
//	L     = L_pg − c_ent·mean(H) + c_vf·L_v
//
// On cancellation of ctx it stops between updates and returns the agent
// trained so far with ctx.Err().
func Train(ctx context.Context, rt *algo.Runtime, cfg *Config) (*onpolicy.Agent, error) {
	h := rt.Header
	if err := errors.Join(h.Validate(), cfg.Validate(h)); err != nil {
		return nil, err
	}
	// Sizes.
	batchSize := cfg.NumEnvs * cfg.NumSteps
	numIterations := int(h.Steps / int64(batchSize))

	// Seeds.
	rInit := rng.New(h.Seed, "a2c/init", 0)
	rAct := rng.New(h.Seed, "a2c/actor", 0)
	envSeed := int64(rng.Derive(h.Seed, "a2c/env", 0) >> 1)

	// Envs and agent.
	envs, agent, err := onpolicy.Start("a2c", h.Env, cfg.NumEnvs, cfg.agentConfig(), rInit)
	if err != nil {
		return nil, err
	}
	rt.Track(agent) // divergence guard (algo.TrainRun)
	defer envs.Close()
	defer agent.Close() // stops the parallel worker; the agent stays usable

	// Optimizer.
	agent.Reserve(batchSize)
	var opt nn.Optimizer
	if cfg.UseRMSProp {
		opt, err = nn.NewRMSProp(nn.RMSPropConfig{LR: cfg.LearningRate, Alpha: 0.99, Eps: cfg.RMSPropEps})
	} else {
		opt, err = nn.NewAdam(nn.AdamConfig{LR: cfg.LearningRate, Eps: cfg.RMSPropEps})
	}
	if err != nil {
		return nil, fmt.Errorf("a2c: %w", err)
	}
	params := agent.Params()

	// Storage and the two halves of the loss.
	ro := onpolicy.NewRollout(cfg.NumSteps, cfg.NumEnvs, agent.ObsDim, agent.ActDim)
	loss := &losses{cfg: cfg, ro: ro, adv: make([]float32, batchSize)}
	policyLoss, valueLoss := loss.policyLoss, loss.valueLoss // bound once: no allocation per update

	var globalStep int64
	if err := ro.Reset(envs, envSeed); err != nil {
		return nil, fmt.Errorf("a2c: %w", err)
	}
	for iteration := 1; iteration <= numIterations; iteration++ {
		if err := ctx.Err(); err != nil {
			return agent, err
		}
		if cfg.AnnealLR {
			opt.SetLR(nn.LinearSchedule(cfg.LearningRate, 0, iteration-1, numIterations))
		}

		// Rollout (truncations bootstrapped from the final observation).
		if err := ro.Collect(envs, agent, rAct, rt.Log, &globalStep, cfg.Gamma); err != nil {
			return agent, fmt.Errorf("a2c: %w", err)
		}

		// Advantages and returns.
		ro.Advantages(cfg.Gamma, cfg.GAELambda)
		copy(loss.adv, ro.Adv)
		if cfg.NormAdv {
			onpolicy.NormalizeTo(loss.adv, ro.Adv)
		}

		// One gradient step on the whole rollout: the policy and value
		// halves of the loss run side by side (Agent.Learn).
		agent.Learn(ro.Obs, ro.Actions, batchSize, policyLoss, valueLoss)
		if cfg.MaxGradNorm > 0 {
			nn.ClipGradNorm(params, cfg.MaxGradNorm)
		}
		opt.Step(params)

		// Log.
		rt.Log.Scalar("charts/learning_rate", float64(opt.LR()))
		rt.Log.Scalar("losses/value_loss", loss.vLoss)
		rt.Log.Scalar("losses/policy_loss", loss.pgLoss)
		rt.Log.Scalar("losses/entropy", loss.entropy)
		rt.Log.Scalar("losses/explained_variance", onpolicy.ExplainedVariance(ro.Values, ro.Returns))
		rt.Log.Step(globalStep)
	}
	return agent, nil
}

// losses holds A2C's loss halves (passed to Agent.Learn) and the
// statistics of the last update.
type losses struct {
	cfg                    *Config
	ro                     *onpolicy.Rollout
	adv                    []float32 // advantages, normalised if norm_adv
	pgLoss, vLoss, entropy float64
}

// policyLoss: L_pg − c_ent·mean(H), so dL/dlog π = −Â/B and dL/dH = −c_ent/B.
func (l *losses) policyLoss(dLogProb, dEntropy, logProb, entropy []float32) {
	B := len(logProb)
	invB := 1 / float32(B)
	var pgLoss, entSum float64
	for r := range B {
		pgLoss += float64(-l.adv[r] * logProb[r])
		dLogProb[r] = -l.adv[r] * invB
		entSum += float64(entropy[r])
		dEntropy[r] = -l.cfg.EntCoef * invB
	}
	l.pgLoss, l.entropy = pgLoss/float64(B), entSum/float64(B)
}

// valueLoss: c_vf·mean((V − R)²), so dL/dV = 2·c_vf·(V − R)/B.
func (l *losses) valueLoss(dValue, value []float32) {
	B := len(value)
	invB := 1 / float32(B)
	var vLoss float64
	for r := range B {
		d := value[r] - l.ro.Returns[r]
		vLoss += float64(d * d)
		dValue[r] = l.cfg.VFCoef * 2 * d * invB
	}
	l.vLoss = vLoss / float64(B)
}
