package sac

import (
	"context"
	"fmt"
	"math/rand/v2"

	"herd/algo"
	"herd/algo/internal/offpolicy"
	"herd/env"
	"herd/nn"
)

// Config is SAC's section of a run configuration. Defaults are CleanRL's
// sac_continuous_action.py; a zero written in the file stays zero.
type Config struct {
	// num_envs, parallel (the second critic beside the first),
	// buffer_size, gamma, tau (of the target critics), batch_size,
	// learning_starts (steps of uniformly random actions first) and
	// net_arch (the actor's and the critics' hidden widths).
	offpolicy.Common `yaml:",inline"`

	// PolicyLR is the actor's Adam learning rate. Default 3e-4.
	PolicyLR float64 `yaml:"policy_lr"`
	// QLR is the critics' (and α's) Adam learning rate. Default 1e-3.
	QLR float64 `yaml:"q_lr"`
	// PolicyFrequency delays the actor: every PolicyFrequency steps it
	// takes PolicyFrequency updates (TD3's delay, compensated). Default 2.
	PolicyFrequency int `yaml:"policy_frequency"`
	// TargetNetworkFrequency is the number of steps between Polyak
	// updates of the target critics. Default 1.
	TargetNetworkFrequency int `yaml:"target_network_frequency"`
	// Alpha is the entropy coefficient α when Autotune is off. Default 0.2.
	Alpha float64 `yaml:"alpha"`
	// Autotune learns α towards a target entropy of −dim(A) (Haarnoja et
	// al. 2018b, §5). Default true.
	Autotune bool `yaml:"autotune"`
}

// NewConfig returns CleanRL's sac_continuous_action.py defaults.
func NewConfig() *Config {
	return &Config{
		Common: offpolicy.Common{
			NumEnvs:        1,
			Parallel:       true,
			BufferSize:     1000000,
			Gamma:          0.99,
			Tau:            0.005,
			BatchSize:      256,
			LearningStarts: 5000,
			NetArch:        []int{256, 256},
		},
		PolicyLR:               3e-4,
		QLR:                    1e-3,
		PolicyFrequency:        2,
		TargetNetworkFrequency: 1,
		Alpha:                  0.2,
		Autotune:               true,
	}
}

// Validate reports every problem with the configuration.
func (c *Config) Validate(h algo.Header) error {
	p := algo.Problems{Name: "sac"}
	c.Common.Check(p.Add)
	if !(c.PolicyLR > 0) || !(c.QLR > 0) {
		p.Add("policy_lr and q_lr must be > 0, got %v and %v", c.PolicyLR, c.QLR)
	}
	if c.PolicyFrequency < 1 || c.TargetNetworkFrequency < 1 {
		p.Add("policy_frequency and target_network_frequency must be ≥ 1, got %d and %d", c.PolicyFrequency, c.TargetNetworkFrequency)
	}
	if !(c.Alpha >= 0) {
		p.Add("alpha must be ≥ 0, got %v", c.Alpha)
	}
	if err := offpolicy.CheckEnv(h.Envs, h.Env); err != nil {
		p.Add("%v", err)
	}
	return p.Err()
}

// Scalars are the metrics.csv columns SAC writes.
var Scalars = []string{"losses/qf1_values", "losses/qf2_values", "losses/qf_loss",
	"losses/actor_loss", "losses/alpha", "losses/alpha_loss"}

// Spec describes SAC to the CLI.
func Spec() algo.Spec {
	return algo.Spec{
		Name:       "sac",
		Can:        algo.CanTransitionLearner | algo.CanGradApply | algo.CanAgentRows | algo.CanStatelessPolicy,
		Doc:        "Soft Actor-Critic (Haarnoja et al. 2018): twin Q, tanh-Gaussian policy, automatic entropy tuning",
		Scalars:    Scalars,
		NewConfig:  func() algo.Config { return NewConfig() },
		Train:      offpolicy.TrainFunc("sac", Train),
		LoadPolicy: LoadPolicy,
		Pieces:     Pieces,
		Resumable:  true,
	}
}

// Agent holds SAC's networks: the actor π(·|s) (an MLP whose 2·dim(A)
// outputs parametrise a tanh-squashed Gaussian) and the twin critics
// Q1, Q2. As a policy it acts with the squashed mean, tanh(μ)·scale + bias.
type Agent struct {
	Actor    *nn.MLP
	Head     *nn.TanhGaussian
	QF1, QF2 *nn.Critic
}

func newAgent(obsDim int, low, high []float32, arch []int, r *rand.Rand) (*Agent, error) {
	head, err := nn.NewTanhGaussian(low, high)
	if err != nil {
		return nil, err
	}
	actDim := len(low)
	actor, err := nn.NewMLP(nn.MLPConfig{In: obsDim, Hidden: arch, Out: head.OutDim(), Act: nn.ReLU}, r)
	if err != nil {
		return nil, err
	}
	qf, err := offpolicy.NewCritics(2, obsDim, actDim, arch, r)
	if err != nil {
		return nil, err
	}
	return &Agent{Actor: actor, Head: head, QF1: qf[0], QF2: qf[1]}, nil
}

// Act writes the deterministic action tanh(μ(s))·scale + bias into dst.
func (a *Agent) Act(dst, obs []float32) []float32 {
	return a.Head.ModeTo(dst, a.Actor.Forward(obs, 1))
}

func (a *Agent) nets() []offpolicy.Named {
	return []offpolicy.Named{{Prefix: "actor", Params: a.Actor.Params()},
		{Prefix: "qf1", Params: a.QF1.Params()}, {Prefix: "qf2", Params: a.QF2.Params()}}
}

// Params returns the parameters Save writes (algo.ParamModel).
func (a *Agent) Params() []*nn.Param { return offpolicy.Params(a.nets()) }

// Save writes the actor and both critics to path (safetensors, prefixed
// actor., qf1., qf2.).
func (a *Agent) Save(path string) error {
	return offpolicy.Save(path, a.nets(), map[string]string{"algo": "sac"})
}

// LoadPolicy rebuilds the deterministic policy saved by Agent.Save.
func LoadPolicy(path string, h algo.Header, c algo.Config) (algo.Policy, error) {
	return offpolicy.LoadPolicy("sac", path, h, c, func(c *Config) []int { return c.NetArch }, newAgent, (*Agent).nets)
}

// Train runs SAC for rt.Header.Steps environment steps: the local
// executor, the shortest composition of the pieces (see Pieces). The env
// worker acts with the learner's live actor (same goroutine, no copy of
// the weights), as the loop before the pieces did.
func Train(ctx context.Context, rt *algo.Runtime, cfg *Config) (algo.Model, error) {
	if err := cfg.Validate(rt.Header); err != nil {
		return nil, err
	}
	// Per env step: act (uniformly random until learning starts, then
	// ã ~ π(·|s)), step, assemble (s, a, r, s', terminated) with s' the true
	// final observation on truncation, store, one update once learning has
	// started, log, hand obs over.
	return offpolicy.TrainLocal(ctx, rt, "sac", cfg.NumEnvs, func(sp algo.Spaces) (*offpolicy.LocalPieces, error) {
		p, err := newPieces(rt.Header, cfg, sp)
		if err != nil {
			return nil, fmt.Errorf("sac: %w", err)
		}
		return offpolicy.NewLocalPieces(p.newLearner, p.newReplay, p.newSampler, p.newAssembler, func(l *Learner) algo.PolicyNet { return &offpolicy.MLPPolicy{Net: l.actor} }), nil
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

// Networks lists the actor (mean and log-std heads), the twin critics,
// trained with Adam, and the critics' targets (algo.Networker).
func (c *Config) Networks(obs, act env.Space) []algo.Network {
	return offpolicy.Networks(obs, act, c.NetArch, 2*act.Dim(), 2, false)
}
