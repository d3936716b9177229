package a3c

import (
	"fmt"

	"herd/algo"
	"herd/algo/a2c"
	"herd/env"
)

// Config holds A3C's settings: A2C's network, loss and optimizer (the yaml
// keys are a2c's), computed per worker. Defaults follow the rl-baselines3-zoo
// A2C CartPole setting, spread over the workers.
type Config struct {
	// Rollout.
	NumEnvs  int `yaml:"num_envs"`  // envs in all, spread over runtime.env_workers workers; default 8
	NumSteps int `yaml:"num_steps"` // steps per env per gradient (t_max); default 5
	// MaxPolicyLag bounds the updates the driver may have applied since
	// the weights a gradient was computed at when it applies it
	// (algo.AsyncPlan); at least env_workers − 1, and 0 means that
	// least bound, under which gradients are applied in the order their
	// segments were requested.
	MaxPolicyLag int `yaml:"max_policy_lag"` // default 0

	// Optimisation (one optimizer, on the driver).
	LearningRate float32 `yaml:"learning_rate"` // step size; default 7e-4
	UseRMSProp   bool    `yaml:"use_rms_prop"`  // RMSprop (α 0.99) instead of Adam; default true
	RMSPropEps   float32 `yaml:"rms_prop_eps"`  // optimizer ε; default 1e-5
	MaxGradNorm  float32 `yaml:"max_grad_norm"` // each worker's gradient clipped to this global norm, 0 = off; default 0.5

	// Objective.
	Gamma     float32 `yaml:"gamma"`      // discount γ; default 0.99
	GAELambda float32 `yaml:"gae_lambda"` // λ; 1 = plain n-step returns; default 1
	NormAdv   bool    `yaml:"norm_adv"`   // normalise advantages per gradient; default false
	EntCoef   float32 `yaml:"ent_coef"`   // entropy bonus coefficient; default 0
	VFCoef    float32 `yaml:"vf_coef"`    // value loss coefficient; default 0.5

	// Networks.
	Encoder    string  `yaml:"encoder"`      // mlp, or minatar / nature / impala for images (as A2C's); default mlp
	Hidden     []int   `yaml:"hidden"`       // hidden widths; default [64, 64]
	Activation string  `yaml:"activation"`   // hidden activation; default tanh
	OrthoInit  bool    `yaml:"ortho_init"`   // orthogonal init (gains √2, 0.01, 1); default true
	InitLogStd float32 `yaml:"init_log_std"` // Gaussian log-std at start (Box actions); default 0
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		NumEnvs: 8, NumSteps: 5,
		LearningRate: 7e-4, UseRMSProp: true, RMSPropEps: 1e-5, MaxGradNorm: 0.5,
		Gamma: 0.99, GAELambda: 1, VFCoef: 0.5,
		Hidden: []int{64, 64}, Activation: "tanh", OrthoInit: true, Encoder: "mlp",
	}
}

// a2c is the A2C config whose pieces A3C runs. Learning-rate annealing is
// off: its horizon counts A2C's updates, not the workers' gradients. The
// actor and critic passes run on one goroutine per worker.
func (c *Config) a2c() *a2c.Config {
	return &a2c.Config{NumEnvs: c.NumEnvs, NumSteps: c.NumSteps, LearningRate: c.LearningRate,
		UseRMSProp: c.UseRMSProp, RMSPropEps: c.RMSPropEps, MaxGradNorm: c.MaxGradNorm, Gamma: c.Gamma,
		GAELambda: c.GAELambda, NormAdv: c.NormAdv, EntCoef: c.EntCoef, VFCoef: c.VFCoef, Hidden: c.Hidden,
		Activation: c.Activation, OrthoInit: c.OrthoInit, InitLogStd: c.InitLogStd, Encoder: c.Encoder}
}

// Validate reports every problem with the config (A2C's checks).
func (c *Config) Validate(h algo.Header) error {
	if err := c.a2c().Validate(h); err != nil {
		return fmt.Errorf("a3c: %w", err)
	}
	if c.MaxPolicyLag < 0 {
		return fmt.Errorf("%w: a3c: max_policy_lag must be >= 0 (0: env_workers − 1), got %d", algo.ErrConfig, c.MaxPolicyLag)
	}
	return nil
}

// Spec describes A3C to the CLI (algo/all). It has no Train of its own:
// every executor that runs it runs its plan (AsyncPlan).
func Spec() algo.Spec {
	return algo.Spec{
		Name:      "a3c",
		Can:       algo.CanGradApply | algo.CanPlan | algo.CanStatelessPolicy | algo.CanCarriedState,
		Resumable: true,
		Doc:       "Asynchronous Advantage Actor-Critic: workers compute gradients, the driver applies them as they arrive (a dataflow plan)",
		Scalars:   append(a2c.Scalars(), "charts/policy_lag", "charts/policy_lag_max"),
		NewConfig: func() algo.Config {
			c := DefaultConfig()
			return &c
		},
		LoadPolicy: func(path string, h algo.Header, c algo.Config) (algo.Policy, error) {
			cfg, err := algo.ConfigAs[*Config]("a3c", c, h)
			if err != nil {
				return nil, err
			}
			return a2c.LoadPolicy(path, h, cfg.a2c())
		},
		Pieces: func(h algo.Header, c algo.Config, sp algo.Spaces) (*algo.Pieces, error) {
			cfg, err := algo.ConfigAs[*Config]("a3c", c, h)
			if err != nil {
				return nil, err
			}
			return a2c.Pieces(h, cfg.a2c(), sp)
		},
	}
}

// AsyncPlan is A3C (Mnih et al. 2016) as a dataflow plan (RLlib Flow,
// Listing 1; built by flow.AsyncPlan): each worker computes the gradient of
// A2C's loss on its own segment, on its own actor; the driver applies the
// gradients one at a time as they arrive (no Hogwild), at most
// max_policy_lag updates after the weights they were computed at, and
// sends the new weights back to the worker whose gradient it applied,
// before that worker's next segment.
func (c *Config) AsyncPlan() algo.AsyncPlan {
	return algo.AsyncPlan{NumEnvs: c.NumEnvs, NumSteps: c.NumSteps, Gamma: c.Gamma, NumAsync: 1, MaxPolicyLag: c.MaxPolicyLag, Gradients: true}
}

// Networks lists A2C's networks (algo.Networker).
func (c *Config) Networks(obs, act env.Space) []algo.Network { return c.a2c().Networks(obs, act) }
