package td3

import (
	"context"
	"fmt"
	"math/rand/v2"

	"herd/algo"
	"herd/algo/internal/offpolicy"
	"herd/env"
)

// Config is TD3's section of a run configuration. Defaults are CleanRL's
// td3_continuous_action.py; a zero written in the file stays zero.
type Config struct {
	// num_envs, parallel (the second critic beside the first),
	// buffer_size, gamma, tau, batch_size, learning_starts (steps of
	// uniformly random actions first) and net_arch (the actor's and the
	// critics' hidden widths).
	offpolicy.Common `yaml:",inline"`

	// LearningRate of both Adam optimizers (actor and critics). Default 3e-4.
	LearningRate float64 `yaml:"learning_rate"`
	// PolicyNoise is the std of the target policy smoothing noise, in units
	// of the action scale. Default 0.2.
	PolicyNoise float64 `yaml:"policy_noise"`
	// NoiseClip clips the smoothing noise to ±NoiseClip (action-scale
	// units). Default 0.5.
	NoiseClip float64 `yaml:"noise_clip"`
	// ExplorationNoise is the std σ of the exploration noise, in units of
	// the action scale. Default 0.1.
	ExplorationNoise float64 `yaml:"exploration_noise"`
	// NoiseType is "normal" (independent Gaussian noise each step, CleanRL)
	// or "ou" (Ornstein–Uhlenbeck noise, temporally correlated, reset at
	// each episode start: Stable-Baselines3's OrnsteinUhlenbeckActionNoise
	// with θ = 0.15, dt = 0.01), which explores sparse-reward tasks such as
	// MountainCarContinuous. Default "normal".
	NoiseType string `yaml:"noise_type"`
	// PolicyFrequency is the delay d: the actor and the targets update every
	// d critic updates. Default 2.
	PolicyFrequency int `yaml:"policy_frequency"`
}

// NewConfig returns CleanRL's td3_continuous_action.py defaults.
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
		PolicyNoise:      0.2,
		NoiseClip:        0.5,
		ExplorationNoise: 0.1,
		NoiseType:        "normal",
		PolicyFrequency:  2,
	}
}

// Validate reports every problem with the configuration.
func (c *Config) Validate(h algo.Header) error {
	p := algo.Problems{Name: "td3"}
	c.Common.Check(p.Add)
	if !(c.LearningRate > 0) {
		p.Add("learning_rate must be > 0, got %v", c.LearningRate)
	}
	if !(c.PolicyNoise >= 0) || !(c.NoiseClip >= 0) || !(c.ExplorationNoise >= 0) {
		p.Add("policy_noise, noise_clip and exploration_noise must be ≥ 0, got %v, %v, %v",
			c.PolicyNoise, c.NoiseClip, c.ExplorationNoise)
	}
	if c.NoiseType != "normal" && c.NoiseType != "ou" {
		p.Add("noise_type must be normal or ou, got %q", c.NoiseType)
	}
	if c.PolicyFrequency < 1 {
		p.Add("policy_frequency must be ≥ 1, got %d", c.PolicyFrequency)
	}
	if err := offpolicy.CheckEnv(h.Envs, h.Env); err != nil {
		p.Add("%v", err)
	}
	return p.Err()
}

// Scalars are the metrics.csv columns TD3 writes.
var Scalars = []string{"losses/qf1_values", "losses/qf2_values", "losses/qf_loss", "losses/actor_loss"}

// Spec describes TD3 to the CLI.
func Spec() algo.Spec {
	return algo.Spec{
		Name:       "td3",
		Can:        algo.CanTransitionLearner | algo.CanGradApply | algo.CanAgentRows | algo.CanStatelessPolicy,
		Doc:        "Twin Delayed DDPG (Fujimoto et al. 2018): twin Q, target policy smoothing, delayed policy updates",
		Scalars:    Scalars,
		NewConfig:  func() algo.Config { return NewConfig() },
		Train:      offpolicy.TrainFunc("td3", Train),
		LoadPolicy: LoadPolicy,
		Pieces:     Pieces,
		Resumable:  true,
	}
}

// Agent holds TD3's networks: the deterministic actor μ(s) = tanh(f(s))·
// scale + bias and the twin critics Q1, Q2 (QF). As a policy it acts with
// μ; Save writes the actor and both critics (safetensors, prefixed actor.,
// qf1., qf2.).
type Agent = offpolicy.DPGAgent

func newAgent(obsDim int, low, high []float32, arch []int, r *rand.Rand) (*Agent, error) {
	return offpolicy.NewDPGAgent("td3", 2, obsDim, low, high, arch, r)
}

// LoadPolicy rebuilds the deterministic policy saved by Agent.Save.
func LoadPolicy(path string, h algo.Header, c algo.Config) (algo.Policy, error) {
	return offpolicy.LoadPolicy("td3", path, h, c, func(c *Config) []int { return c.NetArch }, newAgent, (*Agent).Nets)
}

// Train runs TD3 for rt.Header.Steps environment steps: the local
// executor, the shortest composition of the pieces (see Pieces). The env
// worker acts with the learner's live actor (same goroutine, no copy of
// the weights), as the loop before the pieces did.
func Train(ctx context.Context, rt *algo.Runtime, cfg *Config) (algo.Model, error) {
	if err := cfg.Validate(rt.Header); err != nil {
		return nil, err
	}
	// Per env step: act (uniformly random until learning starts, then
	// clip(μ(s) + noise·scale, low, high), noise ~ N(0, σ²) or OU), step,
	// assemble (s, a, r, s', terminated), store, one critic update once
	// learning has started, log, hand obs over.
	return offpolicy.TrainLocal(ctx, rt, "td3", cfg.NumEnvs, func(sp algo.Spaces) (*offpolicy.LocalPieces, error) {
		p, err := newPieces(rt.Header, cfg, sp)
		if err != nil {
			return nil, fmt.Errorf("td3: %w", err)
		}
		return offpolicy.NewLocalPieces(p.newLearner, p.Replay, p.Sampler, p.Assembler, func(l *Learner) algo.PolicyNet { return offpolicy.ActorPolicy(l.Actor, l.Head) }), nil
	})
}

func clamp(x, lo, hi float64) float64 { return max(lo, min(hi, x)) }

func clamp32(x, lo, hi float32) float32 { return max(lo, min(hi, x)) }

// WithMinibatch returns a copy with batch_size n (algo.Minibatcher).
func (c *Config) WithMinibatch(n int) algo.Config {
	return algo.With(c, func(d *Config) { d.BatchSize = n })
}

// WithReplayCapacity returns a copy with buffer_size n (algo.ReplaySizer).
func (c *Config) WithReplayCapacity(n int) algo.Config {
	return algo.With(c, func(d *Config) { d.BufferSize = n })
}

// Networks lists the actor and the twin critics, trained with Adam, and
// their targets (algo.Networker).
func (c *Config) Networks(obs, act env.Space) []algo.Network {
	return offpolicy.Networks(obs, act, c.NetArch, act.Dim(), 2, true)
}
