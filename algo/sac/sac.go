package sac

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"herd/algo"
	"herd/algo/internal/offpolicy"
	"herd/internal/rng"
	"herd/internal/twin"
	"herd/nn"
)

// Config is SAC's section of a run configuration. Defaults are CleanRL's
// sac_continuous_action.py; a zero written in the file stays zero.
type Config struct {
	// --- run ---

	// NumEnvs is the number of environments stepped together. Default 1.
	NumEnvs int `yaml:"num_envs"`

	// --- algorithm ---

	// BufferSize is the replay memory size. Default 1000000.
	BufferSize int `yaml:"buffer_size"`
	// Gamma is the discount γ. Default 0.99.
	Gamma float64 `yaml:"gamma"`
	// Tau is the Polyak rate τ of the target critics. Default 0.005.
	Tau float64 `yaml:"tau"`
	// BatchSize is the minibatch size sampled from replay. Default 256.
	BatchSize int `yaml:"batch_size"`
	// LearningStarts is the number of steps of uniformly random actions
	// before learning starts. Default 5000.
	LearningStarts int `yaml:"learning_starts"`
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
	// NetArch lists the hidden widths of the actor and the critics (ReLU).
	// Default [256, 256].
	NetArch []int `yaml:"net_arch"`
}

// NewConfig returns CleanRL's sac_continuous_action.py defaults.
func NewConfig() *Config {
	return &Config{
		NumEnvs:                1,
		BufferSize:             1000000,
		Gamma:                  0.99,
		Tau:                    0.005,
		BatchSize:              256,
		LearningStarts:         5000,
		PolicyLR:               3e-4,
		QLR:                    1e-3,
		PolicyFrequency:        2,
		TargetNetworkFrequency: 1,
		Alpha:                  0.2,
		Autotune:               true,
		NetArch:                []int{256, 256},
	}
}

// Validate reports every problem with the configuration.
func (c *Config) Validate(h algo.Header) error {
	var errs []error
	bad := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("%w: sac: "+format, append([]any{algo.ErrConfig}, a...)...))
	}
	offpolicy.Common{NumEnvs: c.NumEnvs, BatchSize: c.BatchSize, BufferSize: c.BufferSize,
		LearningStarts: c.LearningStarts, Gamma: c.Gamma, Tau: c.Tau, NetArch: c.NetArch}.Check(bad)
	if !(c.PolicyLR > 0) || !(c.QLR > 0) {
		bad("policy_lr and q_lr must be > 0, got %v and %v", c.PolicyLR, c.QLR)
	}
	if c.PolicyFrequency < 1 || c.TargetNetworkFrequency < 1 {
		bad("policy_frequency and target_network_frequency must be ≥ 1, got %d and %d", c.PolicyFrequency, c.TargetNetworkFrequency)
	}
	if !(c.Alpha >= 0) {
		bad("alpha must be ≥ 0, got %v", c.Alpha)
	}
	if err := offpolicy.CheckEnv(h.Env); err != nil {
		bad("%v", err)
	}
	return errors.Join(errs...)
}

// Scalars are the metrics.csv columns SAC writes.
var Scalars = []string{"losses/qf1_values", "losses/qf2_values", "losses/qf_loss",
	"losses/actor_loss", "losses/alpha", "losses/alpha_loss"}

// Spec describes SAC to the CLI.
func Spec() algo.Spec {
	return algo.Spec{
		Name:       "sac",
		Doc:        "Soft Actor-Critic (Haarnoja et al. 2018): twin Q, tanh-Gaussian policy, automatic entropy tuning",
		Scalars:    Scalars,
		NewConfig:  func() algo.Config { return NewConfig() },
		Train:      offpolicy.TrainFunc("sac", Train),
		LoadPolicy: LoadPolicy,
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

// Train runs SAC for rt.Header.Steps environment steps.
func Train(ctx context.Context, rt *algo.Runtime, cfg *Config) (algo.Model, error) {
	if err := cfg.Validate(rt.Header); err != nil {
		return nil, err
	}
	h := rt.Header
	seed := h.Seed

	// Envs and replay: N synchronous copies, driven by the shared collector.
	col, err := offpolicy.NewCollector(h.Env, cfg.NumEnvs, cfg.BufferSize, cfg.Gamma)
	if err != nil {
		return nil, fmt.Errorf("sac: %w", err)
	}
	defer col.Close()
	obsDim, actDim, low, high, rb := col.ObsDim, col.ActDim, col.Low, col.High, col.Replay
	N := cfg.NumEnvs

	// Agent, target critics, optimizers.
	agent, err := newAgent(obsDim, low, high, cfg.NetArch, rng.New(seed, "sac/init", 0))
	if err != nil {
		return nil, err
	}
	rt.Track(agent) // divergence guard (algo.TrainRun)
	actor, head, qf1, qf2 := agent.Actor, agent.Head, agent.QF1, agent.QF2
	qf1Target, qf2Target := qf1.Clone(), qf2.Clone()
	qParams := append(slices.Clone(qf1.Params()), qf2.Params()...)
	qOpt, err := nn.NewAdam(nn.AdamConfig{LR: float32(cfg.QLR)})
	if err != nil {
		return nil, err
	}
	actorOpt, err := nn.NewAdam(nn.AdamConfig{LR: float32(cfg.PolicyLR)})
	if err != nil {
		return nil, err
	}
	// Automatic entropy tuning: learn log α towards H̄ = −dim(A).
	targetEntropy := -float64(actDim)
	logAlpha := nn.NewParam("log_alpha", 1) // α starts at 1, as in CleanRL
	alpha := cfg.Alpha
	var aOpt *nn.Adam
	if cfg.Autotune {
		alpha = 1
		if aOpt, err = nn.NewAdam(nn.AdamConfig{LR: float32(cfg.QLR)}); err != nil {
			return nil, err
		}
	}
	exploreRNG := rng.New(seed, "sac/explore", 0)
	learnRNG := rng.New(seed, "sac/learner", 0)
	sampleRNG := rng.New(seed, "sac/replay", 0)

	// Learner workspaces.
	B := cfg.BatchSize
	var (
		nextAct    = make([]float32, B*actDim)
		nextLogPi  = make([]float32, B)
		nextQ      = make([]float32, B) // y = r + γ(1 − d)(min Q'(s', a') − α log π(a'|s'))
		pi         = make([]float32, B*actDim)
		logPi      = make([]float32, B)
		noise      = make([]float32, B*actDim)
		dQ1        = make([]float32, B)
		dQ2        = make([]float32, B)
		dAct       = make([]float32, B*actDim)
		dLogPi     = make([]float32, B)
		dOut       = make([]float32, B*head.OutDim())
		actorLoss  float64
		alphaLoss  float64
		actorSteps int
	)
	for _, net := range []*nn.Critic{qf1, qf2, qf1Target, qf2Target} {
		net.Net.Reserve(B)
	}
	actor.Reserve(B)
	// The twin critics run side by side on two goroutines (bit-identical
	// to one after the other: see offpolicy.Twin).
	par := twin.New()
	defer par.Close()
	critics := offpolicy.NewTwin(qf1, qf2, par, B)
	targets := offpolicy.NewTwin(qf1Target, qf2Target, par, B)

	// updateCritics takes one gradient step on the twin soft Q loss.
	updateCritics := func() (qfLoss, q1Mean, q2Mean float64) {
		// Soft target, without gradient (Haarnoja et al. 2018, eq. 3).
		head.SampleTo(nextAct, nextLogPi, nil, actor.Forward(rb.NextObs, B), learnRNG)
		q1n, q2n := targets.Forward(rb.NextObs, nextAct, B)
		for i := range B {
			minQ := min(q1n[i], q2n[i]) - float32(alpha)*nextLogPi[i]
			nextQ[i] = rb.Reward[i] + rb.Discount[i]*rb.NotDone[i]*minQ
		}
		// Both critics regress onto y: MSE(Q1(s, a), y) + MSE(Q2(s, a), y).
		return critics.Fit(qOpt, qParams, rb.Obs, rb.Action, nextQ, B)
	}

	// updateActor takes one step on E[α log π(ã|s) − min_i Q_i(s, ã)] with
	// the reparameterised ã = tanh(μ + σε)·scale + bias, then (autotune)
	// one step on α.
	updateActor := func() {
		out := actor.Forward(rb.Obs, B)
		head.SampleTo(pi, logPi, noise, out, learnRNG)
		q1, q2 := critics.Forward(rb.Obs, pi, B)
		// dL/dQ_i = −1/B on the rows where critic i gives the minimum.
		var loss float64
		for i := range B {
			dQ1[i], dQ2[i] = 0, 0
			m := q1[i]
			if q2[i] < q1[i] {
				m = q2[i]
				dQ2[i] = -1 / float32(B)
			} else {
				dQ1[i] = -1 / float32(B)
			}
			loss += alpha*float64(logPi[i]) - float64(m)
			dLogPi[i] = float32(alpha) / float32(B)
		}
		actorLoss = loss / float64(B)
		// dL/dã through both critics. This also adds into the critics'
		// gradients, which are zeroed before their next step.
		g1, g2 := critics.Backward(dQ1, dQ2)
		copy(dAct, g1)
		for i, g := range g2 {
			dAct[i] += g
		}
		head.BackwardSample(dOut, out, noise, dAct, dLogPi)
		actor.ZeroGrad()
		actor.Backward(dOut)
		actorOpt.Step(actor.Params())
		actorSteps++

		if cfg.Autotune {
			// L(log α) = −α·E[log π + H̄], with log π from the sample above
			// (taken before the actor step; Stable-Baselines3's order).
			var s float64
			for i := range B {
				s += float64(logPi[i]) + targetEntropy
			}
			s /= float64(B)
			a := math.Exp(float64(logAlpha.Value[0]))
			alphaLoss = -a * s
			logAlpha.Grad[0] = float32(-a * s)
			aOpt.Step([]*nn.Param{logAlpha})
			alpha = math.Exp(float64(logAlpha.Value[0]))
		}
	}

	if err := col.Reset(seed); err != nil {
		return nil, err
	}
	for col.Steps < h.Steps {
		if ctx.Err() != nil {
			return agent, ctx.Err()
		}
		// Act: uniformly random until learning starts, then a sample of π.
		if col.Steps < int64(cfg.LearningStarts) {
			col.RandomActions(exploreRNG)
		} else {
			head.SampleTo(col.Actions, nil, nil, actor.Forward(col.Obs, N), exploreRNG)
		}
		// Step, store (s, a, r, s', terminated) with s' the true final
		// observation on truncation, log, hand obs over.
		prevStep := col.Steps
		if err := col.Step(rt.Log); err != nil {
			return agent, fmt.Errorf("sac: %w", err)
		}
		globalStep := col.Steps

		if globalStep > int64(cfg.LearningStarts) && rb.Len() >= B {
			if err := rb.Sample(B, sampleRNG); err != nil {
				return agent, fmt.Errorf("sac: sample: %w", err)
			}
			qfLoss, q1Mean, q2Mean := updateCritics()
			// Delayed actor: every policy_frequency steps, as many actor
			// steps, all on this minibatch (CleanRL's TD3-style delay).
			if offpolicy.Crossed(prevStep, globalStep, int64(cfg.PolicyFrequency)) {
				for range cfg.PolicyFrequency {
					updateActor()
				}
			}
			if offpolicy.Crossed(prevStep, globalStep, int64(cfg.TargetNetworkFrequency)) {
				if err := offpolicy.PolyakAll(cfg.Tau,
					[2][]*nn.Param{qf1Target.Params(), qf1.Params()},
					[2][]*nn.Param{qf2Target.Params(), qf2.Params()}); err != nil {
					return agent, err
				}
			}
			rt.Log.Scalar("losses/qf1_values", q1Mean)
			rt.Log.Scalar("losses/qf2_values", q2Mean)
			rt.Log.Scalar("losses/qf_loss", qfLoss/2)
			if actorSteps > 0 {
				rt.Log.Scalar("losses/actor_loss", actorLoss)
				rt.Log.Scalar("losses/alpha", alpha)
				if cfg.Autotune {
					rt.Log.Scalar("losses/alpha_loss", alphaLoss)
				}
			}
		}
		rt.Log.Step(globalStep)
	}
	return agent, nil
}
