package dqn

import (
	"context"
	"fmt"
	"math/rand/v2"

	"herd/algo"
	"herd/algo/internal/encoder"
	"herd/algo/internal/offpolicy"
	"herd/env"
	"herd/internal/rng"
	"herd/nn"
)

// Config is DQN's section of a run configuration. Defaults are CleanRL's
// dqn.py (CartPole-v1); a zero written in the file stays zero.
type Config struct {
	// num_envs, parallel (the target network's forward pass and the
	// MLP's second-layer weight gradients beside the caller's work),
	// buffer_size, gamma, tau (1 copies the Q-network every
	// target_network_frequency steps, a hard update; < 1 is Polyak
	// averaging), batch_size, learning_starts and net_arch (the
	// Q-network's hidden widths, after the encoder).
	offpolicy.Common `yaml:",inline"`

	// LearningRate of the optimizer. Default 2.5e-4.
	LearningRate float64 `yaml:"learning_rate"`
	// Optimizer is "adam" (CleanRL dqn.py, PyTorch's defaults) or
	// "rmsprop" (torch.optim.RMSprop with RMSPropAlpha, RMSPropEps and
	// RMSPropCentered; MinAtar's examples/dqn.py uses α 0.95, ε 0.01,
	// centered). Default "adam".
	Optimizer       string  `yaml:"optimizer"`
	RMSPropAlpha    float64 `yaml:"rmsprop_alpha"`
	RMSPropEps      float64 `yaml:"rmsprop_eps"`
	RMSPropCentered bool    `yaml:"rmsprop_centered"`
	// AnnealLR decays the learning rate linearly to 0 over the run (as
	// CleanRL's PPO does), which damps DQN's late collapses. Default false.
	AnnealLR bool `yaml:"anneal_lr"`
	// TargetNetworkFrequency is the number of steps between target updates.
	// Default 500.
	TargetNetworkFrequency int `yaml:"target_network_frequency"`
	// StartE and EndE are ε at the start and end of the exploration
	// schedule. Defaults 1 and 0.05.
	StartE float64 `yaml:"start_e"`
	EndE   float64 `yaml:"end_e"`
	// ExplorationFraction is the fraction of the run over which ε falls
	// linearly from StartE to EndE. Default 0.5.
	ExplorationFraction float64 `yaml:"exploration_fraction"`
	// TrainFrequency is the number of steps between training rounds.
	// Default 10.
	TrainFrequency int `yaml:"train_frequency"`
	// GradientSteps is the number of gradient steps per training round
	// (Stable-Baselines3's gradient_steps). Default 1.
	GradientSteps int `yaml:"gradient_steps"`
	// Encoder is the Q-network's input stage: "mlp" (the observation
	// vector straight into the net_arch layers), or a convolutional
	// encoder for image observations (a Box of shape [H, W, C]):
	// "minatar" (MinAtar's DQN network: 16 3×3 filters of stride 1) or
	// "nature" (Mnih et al. 2015: 32 8×8/4, 64 4×4/2, 64 3×3/1), each
	// convolution followed by ReLU, then flattened into the net_arch
	// layers. Default "mlp".
	Encoder string `yaml:"encoder"`
	// Loss is "mse" (CleanRL dqn.py) or "huber" (smooth L1, Mnih et al.
	// 2015). Default "mse".
	Loss string `yaml:"loss"`
	// MaxGradNorm clips the global gradient norm; 0 turns clipping off.
	// Default 0 (CleanRL); Stable-Baselines3 uses 10.
	MaxGradNorm float64 `yaml:"max_grad_norm"`
	// DoubleQ selects Double DQN targets (van Hasselt et al. 2016): the
	// online network picks the next action, the target network values it.
	// Default false.
	DoubleQ bool `yaml:"double_q"`
	// NSteps is n of the n-step return (Sutton 1988; Rainbow). Default 1.
	NSteps int `yaml:"n_steps"`
	// Prioritized selects prioritized replay (Schaul et al. 2016) with
	// priority |δ| + PriorityEps, exponent PriorityAlpha, and β annealed
	// linearly from PriorityBeta to 1 over the run. Defaults false, 0.6,
	// 0.4, 1e-6.
	Prioritized   bool    `yaml:"prioritized"`
	PriorityAlpha float64 `yaml:"priority_alpha"`
	PriorityBeta  float64 `yaml:"priority_beta"`
	PriorityEps   float64 `yaml:"priority_eps"`
	// InitialPriorities says at which priority new transitions enter
	// prioritized replay: "max" (the running maximum, Schaul et al. 2016)
	// or "actor" (Ape-X: |δ| + priority_eps computed by the env worker
	// with its policy copy; needs prioritized: true). Default "max".
	InitialPriorities string `yaml:"initial_priorities"`
	// ApeXEpsilon, when > 0, replaces the ε schedule of executors with
	// several actors (dist's off-policy topology, a flow plan's env
	// workers) by Ape-X's fixed per-actor rates
	// ε_i = ApeXEpsilon^(1 + 7·i/(N−1)) (Horgan et al. 2018 use 0.4);
	// the local loop and single actors keep the schedule.
	// Default 0 (off).
	ApeXEpsilon float64 `yaml:"apex_epsilon,omitempty"`
	// ApeXSyncSteps is the number of an Ape-X actor's own env steps
	// between its copies of the learner's weights (Horgan et al. 2018:
	// every 400 frames), read by the flow executor's Ape-X plan
	// (initial_priorities: actor); 0 sends every update to every actor.
	// The pal and dist executors use runtime.refresh_every instead.
	// Default 400.
	ApeXSyncSteps int `yaml:"apex_sync_steps"`
}

// NewConfig returns CleanRL's dqn.py defaults.
func NewConfig() *Config {
	return &Config{
		Common: offpolicy.Common{
			NumEnvs:        1,
			Parallel:       true,
			BufferSize:     10000,
			Gamma:          0.99,
			Tau:            1,
			BatchSize:      128,
			LearningStarts: 10000,
			NetArch:        []int{120, 84},
		},
		LearningRate:           2.5e-4,
		Optimizer:              "adam",
		RMSPropAlpha:           0.99,
		RMSPropEps:             1e-8,
		Encoder:                EncoderMLP,
		TargetNetworkFrequency: 500,
		StartE:                 1,
		EndE:                   0.05,
		ExplorationFraction:    0.5,
		TrainFrequency:         10,
		GradientSteps:          1,
		Loss:                   "mse",
		NSteps:                 1,
		PriorityAlpha:          0.6,
		PriorityBeta:           0.4,
		PriorityEps:            1e-6,
		InitialPriorities:      PrioritiesMax,
		ApeXSyncSteps:          400,
	}
}

// TransitionShape returns num_envs and the update interval U, env steps
// per update (algo.TransitionShape).
func (c *Config) TransitionShape() (numEnvs int, updateInterval float64) {
	return c.NumEnvs, float64(c.TrainFrequency) / float64(c.GradientSteps)
}

// ApeXSync returns apex_sync_steps, the env steps of an Ape-X actor
// between its copies of the learner's weights (flow.ApeXSyncer).
func (c *Config) ApeXSync() int { return c.ApeXSyncSteps }

// Validate reports every problem with the configuration.
func (c *Config) Validate(h algo.Header) error {
	p := algo.Problems{Name: "dqn"}
	bad := p.Add
	c.Common.Check(bad)
	if !(c.LearningRate > 0) {
		bad("learning_rate must be > 0, got %v", c.LearningRate)
	}
	switch c.Optimizer {
	case "adam":
	case "rmsprop":
		if !(c.RMSPropAlpha >= 0 && c.RMSPropAlpha < 1) {
			bad("rmsprop_alpha must be in [0, 1), got %v", c.RMSPropAlpha)
		}
		if !(c.RMSPropEps > 0) {
			bad("rmsprop_eps must be > 0, got %v", c.RMSPropEps)
		}
	default:
		bad("optimizer must be adam or rmsprop, got %q", c.Optimizer)
	}
	if err := encoder.Check(c.Encoder); err != nil {
		bad("%v", err)
	}
	if c.TargetNetworkFrequency < 1 {
		bad("target_network_frequency must be ≥ 1, got %d", c.TargetNetworkFrequency)
	}
	for _, e := range []struct {
		name string
		v    float64
	}{{"start_e", c.StartE}, {"end_e", c.EndE}, {"exploration_fraction", c.ExplorationFraction}} {
		if !(e.v >= 0 && e.v <= 1) {
			bad("%s must be in [0, 1], got %v", e.name, e.v)
		}
	}
	if c.TrainFrequency < 1 {
		bad("train_frequency must be ≥ 1, got %d", c.TrainFrequency)
	}
	if c.GradientSteps < 1 {
		bad("gradient_steps must be ≥ 1, got %d", c.GradientSteps)
	}
	if c.Loss != "mse" && c.Loss != "huber" {
		bad("loss must be mse or huber, got %q", c.Loss)
	}
	if c.MaxGradNorm < 0 {
		bad("max_grad_norm must be ≥ 0, got %v", c.MaxGradNorm)
	}
	if c.NSteps < 1 {
		bad("n_steps must be ≥ 1, got %d", c.NSteps)
	}
	if c.Prioritized {
		if !(c.PriorityAlpha > 0 && c.PriorityAlpha <= 1) {
			bad("priority_alpha must be in (0, 1], got %v", c.PriorityAlpha)
		}
		if !(c.PriorityBeta >= 0 && c.PriorityBeta <= 1) {
			bad("priority_beta must be in [0, 1], got %v", c.PriorityBeta)
		}
		if !(c.PriorityEps > 0) {
			bad("priority_eps must be > 0, got %v", c.PriorityEps)
		}
	}
	if !(c.ApeXEpsilon >= 0 && c.ApeXEpsilon < 1) {
		bad("apex_epsilon must be in [0, 1), got %v", c.ApeXEpsilon)
	}
	if c.ApeXSyncSteps < 0 {
		bad("apex_sync_steps must be ≥ 0, got %d", c.ApeXSyncSteps)
	}
	switch c.InitialPriorities {
	case PrioritiesMax:
	case PrioritiesActor:
		if !c.Prioritized {
			bad("initial_priorities: actor needs prioritized: true (uniform replay has no priorities)")
		}
	default:
		bad("initial_priorities must be %s or %s, got %q", PrioritiesMax, PrioritiesActor, c.InitialPriorities)
	}
	if h.Env != "" {
		if e, err := h.Envs.Make(h.Env); err != nil {
			bad("env %q: %v", h.Env, err)
		} else {
			if _, ok := e.ActionSpace().(env.Discrete); !ok {
				bad("env %s has action space %v; DQN needs a Discrete one", h.Env, e.ActionSpace())
			}
			if err := encoder.CheckEnvSpace(c.Encoder, h.Env, e); err != nil {
				bad("%v", err)
			}
			e.Close()
		}
	}
	return p.Err()
}

// Scalars are the metrics.csv columns DQN writes.
var Scalars = []string{"losses/td_loss", "losses/q_values", "charts/epsilon"}

// Spec describes DQN to the CLI.
func Spec() algo.Spec {
	return algo.Spec{
		Name:      "dqn",
		Can:       algo.CanTransitionLearner | algo.CanGradApply | algo.CanAgentRows | algo.CanStatelessPolicy,
		Doc:       "Deep Q-Network (Mnih et al. 2015) with Double-Q, prioritized replay and n-step options",
		Scalars:   Scalars,
		NewConfig: func() algo.Config { return NewConfig() },
		Train: func(ctx context.Context, rt *algo.Runtime, c algo.Config) (algo.Model, error) {
			return Train(ctx, rt, c.(*Config))
		},
		LoadPolicy: LoadPolicy,
		Pieces:     Pieces,
		Resumable:  true,
	}
}

// Agent is the Q-network Q(s, ·; θ) with one output per action. As a policy
// it acts greedily: a = argmax_a Q(s, a).
type Agent struct {
	q        qNet
	nActions int
	greedy   [1]int
}

// newAgent builds the Q-network the config's encoder names,
// initialised as PyTorch's nn.Linear and nn.Conv2d.
func newAgent(cfg *Config, obs env.Space, nActions int, r *rand.Rand) (*Agent, error) {
	q, err := newQNet(cfg, obs, nActions, r)
	if err != nil {
		return nil, err
	}
	return &Agent{q: q, nActions: nActions}, nil
}

// Act writes the greedy action for one observation into dst[0].
func (a *Agent) Act(dst, obs []float32) []float32 {
	nn.ArgmaxTo(a.greedy[:], a.q.Forward(obs, 1), a.nActions)
	dst[0] = float32(a.greedy[0])
	return dst
}

// Params returns the parameters Save writes (algo.ParamModel).
func (a *Agent) Params() []*nn.Param { return a.q.Params() }

// Save writes the Q-network to path (safetensors).
func (a *Agent) Save(path string) error {
	return nn.SaveFile(path, a.q.Params(), map[string]string{"algo": "dqn"})
}

// LoadPolicy rebuilds the greedy policy saved by Agent.Save.
func LoadPolicy(path string, h algo.Header, c algo.Config) (algo.Policy, error) {
	cfg, ok := c.(*Config)
	if !ok {
		return nil, fmt.Errorf("%w: dqn: config is %T", algo.ErrConfig, c)
	}
	e, err := h.Envs.Make(h.Env)
	if err != nil {
		return nil, err
	}
	defer e.Close()
	d, ok := e.ActionSpace().(env.Discrete)
	if !ok {
		return nil, fmt.Errorf("%w: dqn: env %s has no Discrete action space", algo.ErrConfig, h.Env)
	}
	agent, err := newAgent(cfg, e.ObservationSpace(), d.N, rng.New(h.Seed, "dqn/init", 0))
	if err != nil {
		return nil, err
	}
	if _, err := nn.LoadFile(path, agent.q.Params()); err != nil {
		return nil, fmt.Errorf("dqn: load %s: %w", path, err)
	}
	return agent, nil
}

// Train runs DQN for rt.Header.Steps environment steps: the local
// executor, the shortest composition of the pieces (see Pieces). The env
// worker acts with the learner's live Q-network — same goroutine, no copy —
// rather than with a published weight version: the loop before the pieces
// did the same, and copying the weights at every training round would cost
// about 5% of a CartPole run.
func Train(ctx context.Context, rt *algo.Runtime, cfg *Config) (algo.Model, error) {
	if err := cfg.Validate(rt.Header); err != nil {
		return nil, err
	}
	// Per env step: ε-greedy on Q(s, ·; θ), step the envs, assemble n-step
	// transitions (s' the true final observation where an episode ended),
	// store them, run the training rounds and target updates due at this
	// step, log, hand the next observations over.
	return offpolicy.TrainLocal(ctx, rt, "dqn", cfg.NumEnvs, func(sp algo.Spaces) (*offpolicy.LocalPieces, error) {
		p, err := newPieces(rt.Header, cfg, sp)
		if err != nil {
			return nil, err
		}
		lp := offpolicy.NewLocalPieces(p.newLearner, p.newReplay, p.newSampler, p.newAssembler, func(l *Learner) algo.PolicyNet { return &offpolicy.MLPPolicy{Net: l.q} })
		if cfg.InitialPriorities == PrioritiesActor {
			// The local executor's env worker acts with the learner's live
			// network, so that is the "actor copy" here.
			lp.Prioritizer, _ = p.newPrioritizer()
		}
		return lp, nil
	})
}

// WithMinibatch returns a copy with batch_size n (algo.Minibatcher).
func (c *Config) WithMinibatch(n int) algo.Config {
	return algo.With(c, func(d *Config) { d.BatchSize = n })
}

// WithReplayCapacity returns a copy with buffer_size n (algo.ReplaySizer).
func (c *Config) WithReplayCapacity(n int) algo.Config {
	return algo.With(c, func(d *Config) { d.BufferSize = n })
}

// Networks lists the Q-network, trained with Adam, and its target
// (algo.Networker).
func (c *Config) Networks(obs, act env.Space) []algo.Network {
	q := algo.Network{Name: "q", In: obs.Dim(), Out: algo.OutWidth(act), Hidden: c.NetArch, Moments: 2, Acts: true}
	target := q
	target.Name, target.Moments, target.Acts = "q target", 0, false
	return []algo.Network{q, target}
}
