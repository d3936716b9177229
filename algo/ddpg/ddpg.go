package ddpg

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"

	"herd/algo"
	"herd/algo/internal/offpolicy"
	"herd/internal/rng"
	"herd/nn"
)

// Config is DDPG's section of a run configuration. Defaults are CleanRL's
// ddpg_continuous_action.py; a zero written in the file stays zero.
type Config struct {
	// --- run ---

	// NumEnvs is the number of environments stepped together. Default 1.
	NumEnvs int `yaml:"num_envs"`

	// --- algorithm ---

	// LearningRate of both Adam optimizers (actor and critics). Default 3e-4.
	LearningRate float64 `yaml:"learning_rate"`
	// BufferSize is the replay memory size. Default 1000000.
	BufferSize int `yaml:"buffer_size"`
	// Gamma is the discount γ. Default 0.99.
	Gamma float64 `yaml:"gamma"`
	// Tau is the Polyak rate τ of the target networks. Default 0.005.
	Tau float64 `yaml:"tau"`
	// BatchSize is the minibatch size sampled from replay. Default 256.
	BatchSize int `yaml:"batch_size"`
	// ExplorationNoise is the std of the Gaussian exploration noise, in
	// units of the action scale. Default 0.1.
	ExplorationNoise float64 `yaml:"exploration_noise"`
	// LearningStarts is the number of steps of uniformly random actions
	// before learning starts. Default 25000.
	LearningStarts int `yaml:"learning_starts"`
	// PolicyFrequency: the actor and the targets update every
	// PolicyFrequency critic updates (CleanRL's ddpg_continuous_action.py
	// keeps TD3's delay of 2; 1 is the original DDPG). Default 2.
	PolicyFrequency int `yaml:"policy_frequency"`
	// NetArch lists the hidden widths of the actor and the critics (ReLU).
	// Default [256, 256].
	NetArch []int `yaml:"net_arch"`
}

// NewConfig returns CleanRL's ddpg_continuous_action.py defaults.
func NewConfig() *Config {
	return &Config{
		NumEnvs:          1,
		LearningRate:     3e-4,
		BufferSize:       1000000,
		Gamma:            0.99,
		Tau:              0.005,
		BatchSize:        256,
		ExplorationNoise: 0.1,
		LearningStarts:   25000,
		PolicyFrequency:  2,
		NetArch:          []int{256, 256},
	}
}

// Validate reports every problem with the configuration.
func (c *Config) Validate(h algo.Header) error {
	var errs []error
	bad := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("%w: ddpg: "+format, append([]any{algo.ErrConfig}, a...)...))
	}
	offpolicy.Common{NumEnvs: c.NumEnvs, BatchSize: c.BatchSize, BufferSize: c.BufferSize,
		LearningStarts: c.LearningStarts, Gamma: c.Gamma, Tau: c.Tau, NetArch: c.NetArch}.Check(bad)
	if !(c.LearningRate > 0) {
		bad("learning_rate must be > 0, got %v", c.LearningRate)
	}
	if !(c.ExplorationNoise >= 0) {
		bad("exploration_noise must be ≥ 0, got %v", c.ExplorationNoise)
	}
	if c.PolicyFrequency < 1 {
		bad("policy_frequency must be ≥ 1, got %d", c.PolicyFrequency)
	}
	if err := offpolicy.CheckEnv(h.Env); err != nil {
		bad("%v", err)
	}
	return errors.Join(errs...)
}

// Scalars are the metrics.csv columns DDPG writes.
var Scalars = []string{"losses/qf1_values", "losses/qf1_loss", "losses/actor_loss"}

// Spec describes DDPG to the CLI.
func Spec() algo.Spec {
	return algo.Spec{
		Name:       "ddpg",
		Doc:        "Deep Deterministic Policy Gradient (Lillicrap et al. 2016): deterministic actor, one Q critic, Gaussian exploration",
		Scalars:    Scalars,
		NewConfig:  func() algo.Config { return NewConfig() },
		Train:      offpolicy.TrainFunc("ddpg", Train),
		LoadPolicy: LoadPolicy,
	}
}

// Agent holds DDPG's networks: the deterministic actor μ(s) = tanh(f(s))·
// scale + bias and the critic Q. As a policy it acts with μ.
type Agent struct {
	Actor *nn.MLP
	Head  *nn.TanhActor
	QF1   *nn.Critic
}

func newAgent(obsDim int, low, high []float32, arch []int, r *rand.Rand) (*Agent, error) {
	head, err := nn.NewTanhActor(low, high)
	if err != nil {
		return nil, err
	}
	actDim := len(low)
	actor, err := nn.NewMLP(nn.MLPConfig{In: obsDim, Hidden: arch, Out: actDim, Act: nn.ReLU}, r)
	if err != nil {
		return nil, err
	}
	qf, err := offpolicy.NewCritics(1, obsDim, actDim, arch, r)
	if err != nil {
		return nil, err
	}
	return &Agent{Actor: actor, Head: head, QF1: qf[0]}, nil
}

// Act writes μ(s) into dst.
func (a *Agent) Act(dst, obs []float32) []float32 {
	return a.Head.ActionTo(dst, a.Actor.Forward(obs, 1))
}

func (a *Agent) nets() []offpolicy.Named {
	return []offpolicy.Named{{Prefix: "actor", Params: a.Actor.Params()}, {Prefix: "qf1", Params: a.QF1.Params()}}
}

// Params returns the parameters Save writes (algo.ParamModel).
func (a *Agent) Params() []*nn.Param { return offpolicy.Params(a.nets()) }

// Save writes the actor and the critic to path (safetensors, prefixed
// actor., qf1.).
func (a *Agent) Save(path string) error {
	return offpolicy.Save(path, a.nets(), map[string]string{"algo": "ddpg"})
}

// LoadPolicy rebuilds the deterministic policy saved by Agent.Save.
func LoadPolicy(path string, h algo.Header, c algo.Config) (algo.Policy, error) {
	return offpolicy.LoadPolicy("ddpg", path, h, c, func(c *Config) []int { return c.NetArch }, newAgent, (*Agent).nets)
}

// Train runs DDPG for rt.Header.Steps environment steps.
func Train(ctx context.Context, rt *algo.Runtime, cfg *Config) (algo.Model, error) {
	if err := cfg.Validate(rt.Header); err != nil {
		return nil, err
	}
	h := rt.Header
	seed := h.Seed

	// Envs and replay: N synchronous copies, driven by the shared collector.
	col, err := offpolicy.NewCollector(h.Env, cfg.NumEnvs, cfg.BufferSize, cfg.Gamma)
	if err != nil {
		return nil, fmt.Errorf("ddpg: %w", err)
	}
	defer col.Close()
	obsDim, actDim, low, high, rb := col.ObsDim, col.ActDim, col.Low, col.High, col.Replay
	N := cfg.NumEnvs

	// Agent, target networks, optimizers.
	agent, err := newAgent(obsDim, low, high, cfg.NetArch, rng.New(seed, "ddpg/init", 0))
	if err != nil {
		return nil, err
	}
	rt.Track(agent) // divergence guard (algo.TrainRun)
	actor, head, qf1 := agent.Actor, agent.Head, agent.QF1
	targetActor, qf1Target := actor.Clone(), qf1.Clone()
	qOpt, err := nn.NewAdam(nn.AdamConfig{LR: float32(cfg.LearningRate)})
	if err != nil {
		return nil, err
	}
	actorOpt, err := nn.NewAdam(nn.AdamConfig{LR: float32(cfg.LearningRate)})
	if err != nil {
		return nil, err
	}
	exploreRNG := rng.New(seed, "ddpg/explore", 0)
	sampleRNG := rng.New(seed, "ddpg/replay", 0)

	// Learner workspaces.
	B := cfg.BatchSize
	var (
		nextAct   = make([]float32, B*actDim)
		nextQ     = make([]float32, B) // y = r + γ(1 − d) Q'(s', μ'(s'))
		dQ        = make([]float32, B)
		pi        = make([]float32, B*actDim)
		dOut      = make([]float32, B*actDim)
		actorLoss float64
		updates   int64
	)
	for _, net := range []*nn.Critic{qf1, qf1Target} {
		net.Net.Reserve(B)
	}
	actor.Reserve(B)
	targetActor.Reserve(B)

	// updateCritic takes one step on the TD loss (Lillicrap et al. 2016,
	// Algorithm 1): MSE(Q(s, a), r + γ(1 − d)·Q'(s', μ'(s'))).
	updateCritic := func() (qfLoss, qMean float64) {
		head.ActionTo(nextAct, targetActor.Forward(rb.NextObs, B))
		qn := qf1Target.Forward(rb.NextObs, nextAct, B)
		for i := range B {
			nextQ[i] = rb.Reward[i] + rb.Discount[i]*rb.NotDone[i]*qn[i]
		}
		qf1.ZeroGrad()
		q := qf1.Forward(rb.Obs, rb.Action, B)
		l := nn.MSE(dQ, q, nextQ)
		qMean = offpolicy.Mean(q)
		qf1.Backward(dQ)
		qOpt.Step(qf1.Params())
		return float64(l), qMean
	}

	// updateActor takes one deterministic policy gradient step on
	// −E[Q1(s, μ(s))] (Silver et al. 2014), through the critic's dQ/da.
	updateActor := func() {
		actorLoss = offpolicy.DPGStep(actor, head, qf1, actorOpt, rb.Obs, B, pi, dOut, dQ)
	}

	if err := col.Reset(seed); err != nil {
		return nil, err
	}
	for col.Steps < h.Steps {
		if ctx.Err() != nil {
			return agent, ctx.Err()
		}
		// Act: uniformly random until learning starts, then
		// clip(μ(s) + N(0, (σ·scale)²), low, high).
		if col.Steps < int64(cfg.LearningStarts) {
			col.RandomActions(exploreRNG)
		} else {
			head.ActionTo(col.Actions, actor.Forward(col.Obs, N))
			offpolicy.AddGaussianNoise(col.Actions, head.Scale, low, high, cfg.ExplorationNoise, exploreRNG)
		}
		// Step, store (s, a, r, s', terminated) with s' the true final
		// observation on truncation, log, hand obs over.
		if err := col.Step(rt.Log); err != nil {
			return agent, fmt.Errorf("ddpg: %w", err)
		}
		globalStep := col.Steps

		if globalStep > int64(cfg.LearningStarts) && rb.Len() >= B {
			if err := rb.Sample(B, sampleRNG); err != nil {
				return agent, fmt.Errorf("ddpg: sample: %w", err)
			}
			qfLoss, qMean := updateCritic()
			updates++
			// The actor and both targets move once every policy_frequency
			// critic updates.
			if updates%int64(cfg.PolicyFrequency) == 0 {
				updateActor()
				if err := offpolicy.PolyakAll(cfg.Tau,
					[2][]*nn.Param{targetActor.Params(), actor.Params()},
					[2][]*nn.Param{qf1Target.Params(), qf1.Params()}); err != nil {
					return agent, err
				}
				rt.Log.Scalar("losses/actor_loss", actorLoss)
			}
			rt.Log.Scalar("losses/qf1_values", qMean)
			rt.Log.Scalar("losses/qf1_loss", qfLoss)
		}
		rt.Log.Step(globalStep)
	}
	return agent, nil
}
