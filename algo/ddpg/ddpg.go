package ddpg

import (
	"context"
	"fmt"
	"math/rand/v2"

	"herd/algo"
	"herd/algo/internal/offpolicy"
	"herd/env"
)

// Config is DDPG's section of a run configuration. Defaults are CleanRL's
// ddpg_continuous_action.py; a zero written in the file stays zero.
type Config struct {
	// num_envs, parallel (the target networks' forward pass beside the
	// critic's), buffer_size, gamma, tau, batch_size, learning_starts
	// (steps of uniformly random actions first) and net_arch (the actor's
	// and the critic's hidden widths).
	offpolicy.Common `yaml:",inline"`

	// LearningRate of both Adam optimizers (actor and critics). Default 3e-4.
	LearningRate float64 `yaml:"learning_rate"`
	// ExplorationNoise is the std of the Gaussian exploration noise, in
	// units of the action scale. Default 0.1.
	ExplorationNoise float64 `yaml:"exploration_noise"`
	// PolicyFrequency: the actor and the targets update every
	// PolicyFrequency critic updates (CleanRL's ddpg_continuous_action.py
	// keeps TD3's delay of 2; 1 is the original DDPG). Default 2.
	PolicyFrequency int `yaml:"policy_frequency"`
}

// NewConfig returns CleanRL's ddpg_continuous_action.py defaults.
func NewConfig() *Config {
	return &Config{
		Common: offpolicy.Common{
			NumEnvs:        1,
			Parallel:       true,
			BufferSize:     1000000,
			Gamma:          0.99,
			Tau:            0.005,
			BatchSize:      256,
			LearningStarts: 25000,
			NetArch:        []int{256, 256},
		},
		LearningRate:     3e-4,
		ExplorationNoise: 0.1,
		PolicyFrequency:  2,
	}
}

// Validate reports every problem with the configuration.
func (c *Config) Validate(h algo.Header) error {
	p := algo.Problems{Name: "ddpg"}
	c.Common.Check(p.Add)
	if !(c.LearningRate > 0) {
		p.Add("learning_rate must be > 0, got %v", c.LearningRate)
	}
	if !(c.ExplorationNoise >= 0) {
		p.Add("exploration_noise must be ≥ 0, got %v", c.ExplorationNoise)
	}
	if c.PolicyFrequency < 1 {
		p.Add("policy_frequency must be ≥ 1, got %d", c.PolicyFrequency)
	}
	if err := offpolicy.CheckEnv(h.Envs, h.Env); err != nil {
		p.Add("%v", err)
	}
	return p.Err()
}

// Scalars are the metrics.csv columns DDPG writes.
var Scalars = []string{"losses/qf1_values", "losses/qf1_loss", "losses/actor_loss"}

// Spec describes DDPG to the CLI.
func Spec() algo.Spec {
	return algo.Spec{
		Name:       "ddpg",
		Can:        algo.CanTransitionLearner | algo.CanGradApply | algo.CanAgentRows | algo.CanStatelessPolicy,
		Doc:        "Deep Deterministic Policy Gradient (Lillicrap et al. 2016): deterministic actor, one Q critic, Gaussian exploration",
		Scalars:    Scalars,
		NewConfig:  func() algo.Config { return NewConfig() },
		Train:      offpolicy.TrainFunc("ddpg", Train),
		LoadPolicy: LoadPolicy,
		Pieces:     Pieces,
		Resumable:  true,
	}
}

// Agent holds DDPG's networks: the deterministic actor μ(s) = tanh(f(s))·
// scale + bias and the critic Q (QF[0]). As a policy it acts with μ; Save
// writes the actor and the critic (safetensors, prefixed actor., qf1.).
type Agent = offpolicy.DPGAgent

func newAgent(obsDim int, low, high []float32, arch []int, r *rand.Rand) (*Agent, error) {
	return offpolicy.NewDPGAgent("ddpg", 1, obsDim, low, high, arch, r)
}

// LoadPolicy rebuilds the deterministic policy saved by Agent.Save.
func LoadPolicy(path string, h algo.Header, c algo.Config) (algo.Policy, error) {
	return offpolicy.LoadPolicy("ddpg", path, h, c, func(c *Config) []int { return c.NetArch }, newAgent, (*Agent).Nets)
}

// Train runs DDPG for rt.Header.Steps environment steps: the local
// executor, the shortest composition of the pieces (see Pieces). The env
// worker acts with the learner's live actor (same goroutine, no copy of
// the weights), as the loop before the pieces did.
func Train(ctx context.Context, rt *algo.Runtime, cfg *Config) (algo.Model, error) {
	if err := cfg.Validate(rt.Header); err != nil {
		return nil, err
	}
	// Per env step: act (uniformly random until learning starts, then
	// clip(μ(s) + N(0, (σ·scale)²), low, high)), step, assemble
	// (s, a, r, s', terminated), store, one critic update once learning has
	// started, log, hand obs over.
	return offpolicy.TrainLocal(ctx, rt, "ddpg", cfg.NumEnvs, func(sp algo.Spaces) (*offpolicy.LocalPieces, error) {
		p, err := newPieces(rt.Header, cfg, sp)
		if err != nil {
			return nil, fmt.Errorf("ddpg: %w", err)
		}
		return offpolicy.NewLocalPieces(p.newLearner, p.Replay, p.Sampler, p.Assembler, func(l *Learner) algo.PolicyNet { return offpolicy.ActorPolicy(l.Actor, l.Head) }), nil
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

// Networks lists the actor and the critic, trained with Adam, and their
// targets (algo.Networker).
func (c *Config) Networks(obs, act env.Space) []algo.Network {
	return offpolicy.Networks(obs, act, c.NetArch, act.Dim(), 1, true)
}
