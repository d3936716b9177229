package td3

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"

	"herd/algo"
	"herd/algo/internal/offpolicy"
	"herd/internal/rng"
	"herd/internal/twin"
	"herd/nn"
)

// Config is TD3's section of a run configuration. Defaults are CleanRL's
// td3_continuous_action.py; a zero written in the file stays zero.
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
	// LearningStarts is the number of steps of uniformly random actions
	// before learning starts. Default 25000.
	LearningStarts int `yaml:"learning_starts"`
	// PolicyFrequency is the delay d: the actor and the targets update every
	// d critic updates. Default 2.
	PolicyFrequency int `yaml:"policy_frequency"`
	// NetArch lists the hidden widths of the actor and the critics (ReLU).
	// Default [256, 256].
	NetArch []int `yaml:"net_arch"`
}

// NewConfig returns CleanRL's td3_continuous_action.py defaults.
func NewConfig() *Config {
	return &Config{
		NumEnvs:          1,
		LearningRate:     3e-4,
		BufferSize:       1000000,
		Gamma:            0.99,
		Tau:              0.005,
		BatchSize:        256,
		PolicyNoise:      0.2,
		NoiseClip:        0.5,
		ExplorationNoise: 0.1,
		NoiseType:        "normal",
		LearningStarts:   25000,
		PolicyFrequency:  2,
		NetArch:          []int{256, 256},
	}
}

// Validate reports every problem with the configuration.
func (c *Config) Validate(h algo.Header) error {
	var errs []error
	bad := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("%w: td3: "+format, append([]any{algo.ErrConfig}, a...)...))
	}
	offpolicy.Common{NumEnvs: c.NumEnvs, BatchSize: c.BatchSize, BufferSize: c.BufferSize,
		LearningStarts: c.LearningStarts, Gamma: c.Gamma, Tau: c.Tau, NetArch: c.NetArch}.Check(bad)
	if !(c.LearningRate > 0) {
		bad("learning_rate must be > 0, got %v", c.LearningRate)
	}
	if !(c.PolicyNoise >= 0) || !(c.NoiseClip >= 0) || !(c.ExplorationNoise >= 0) {
		bad("policy_noise, noise_clip and exploration_noise must be ≥ 0, got %v, %v, %v",
			c.PolicyNoise, c.NoiseClip, c.ExplorationNoise)
	}
	if c.NoiseType != "normal" && c.NoiseType != "ou" {
		bad("noise_type must be normal or ou, got %q", c.NoiseType)
	}
	if c.PolicyFrequency < 1 {
		bad("policy_frequency must be ≥ 1, got %d", c.PolicyFrequency)
	}
	if err := offpolicy.CheckEnv(h.Env); err != nil {
		bad("%v", err)
	}
	return errors.Join(errs...)
}

// Scalars are the metrics.csv columns TD3 writes.
var Scalars = []string{"losses/qf1_values", "losses/qf2_values", "losses/qf_loss", "losses/actor_loss"}

// Spec describes TD3 to the CLI.
func Spec() algo.Spec {
	return algo.Spec{
		Name:       "td3",
		Doc:        "Twin Delayed DDPG (Fujimoto et al. 2018): twin Q, target policy smoothing, delayed policy updates",
		Scalars:    Scalars,
		NewConfig:  func() algo.Config { return NewConfig() },
		Train:      offpolicy.TrainFunc("td3", Train),
		LoadPolicy: LoadPolicy,
	}
}

// Agent holds TD3's networks: the deterministic actor μ(s) = tanh(f(s))·
// scale + bias and the twin critics Q1, Q2. As a policy it acts with μ.
type Agent struct {
	Actor    *nn.MLP
	Head     *nn.TanhActor
	QF1, QF2 *nn.Critic
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
	qf, err := offpolicy.NewCritics(2, obsDim, actDim, arch, r)
	if err != nil {
		return nil, err
	}
	return &Agent{Actor: actor, Head: head, QF1: qf[0], QF2: qf[1]}, nil
}

// Act writes μ(s) into dst.
func (a *Agent) Act(dst, obs []float32) []float32 {
	return a.Head.ActionTo(dst, a.Actor.Forward(obs, 1))
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
	return offpolicy.Save(path, a.nets(), map[string]string{"algo": "td3"})
}

// LoadPolicy rebuilds the deterministic policy saved by Agent.Save.
func LoadPolicy(path string, h algo.Header, c algo.Config) (algo.Policy, error) {
	return offpolicy.LoadPolicy("td3", path, h, c, func(c *Config) []int { return c.NetArch }, newAgent, (*Agent).nets)
}

// Train runs TD3 for rt.Header.Steps environment steps.
func Train(ctx context.Context, rt *algo.Runtime, cfg *Config) (algo.Model, error) {
	if err := cfg.Validate(rt.Header); err != nil {
		return nil, err
	}
	h := rt.Header
	seed := h.Seed

	// Envs and replay: N synchronous copies, driven by the shared collector.
	col, err := offpolicy.NewCollector(h.Env, cfg.NumEnvs, cfg.BufferSize, cfg.Gamma)
	if err != nil {
		return nil, fmt.Errorf("td3: %w", err)
	}
	defer col.Close()
	obsDim, actDim, low, high, rb := col.ObsDim, col.ActDim, col.Low, col.High, col.Replay
	N := cfg.NumEnvs

	// Agent, target networks, optimizers.
	agent, err := newAgent(obsDim, low, high, cfg.NetArch, rng.New(seed, "td3/init", 0))
	if err != nil {
		return nil, err
	}
	rt.Track(agent) // divergence guard (algo.TrainRun)
	actor, head, qf1, qf2 := agent.Actor, agent.Head, agent.QF1, agent.QF2
	targetActor, qf1Target, qf2Target := actor.Clone(), qf1.Clone(), qf2.Clone()
	qParams := append(slices.Clone(qf1.Params()), qf2.Params()...)
	qOpt, err := nn.NewAdam(nn.AdamConfig{LR: float32(cfg.LearningRate)})
	if err != nil {
		return nil, err
	}
	actorOpt, err := nn.NewAdam(nn.AdamConfig{LR: float32(cfg.LearningRate)})
	if err != nil {
		return nil, err
	}
	exploreRNG := rng.New(seed, "td3/explore", 0)
	learnRNG := rng.New(seed, "td3/learner", 0)
	sampleRNG := rng.New(seed, "td3/replay", 0)

	// Learner workspaces.
	B := cfg.BatchSize
	var (
		nextAct   = make([]float32, B*actDim)
		nextQ     = make([]float32, B) // y = r + γ(1 − d) min_i Q'_i(s', μ'(s') + clip(ε))
		dQ        = make([]float32, B)
		pi        = make([]float32, B*actDim)
		dOut      = make([]float32, B*actDim)
		ou        = offpolicy.NewOU(N*actDim, cfg.ExplorationNoise)
		actorLoss float64
		updates   int64
	)
	for _, net := range []*nn.Critic{qf1, qf2, qf1Target, qf2Target} {
		net.Net.Reserve(B)
	}
	actor.Reserve(B)
	targetActor.Reserve(B)
	// The twin critics run side by side on two goroutines (bit-identical
	// to one after the other: see offpolicy.Twin).
	par := twin.New()
	defer par.Close()
	critics := offpolicy.NewTwin(qf1, qf2, par, B)
	targets := offpolicy.NewTwin(qf1Target, qf2Target, par, B)

	// updateCritics takes one step on the clipped double-Q loss.
	updateCritics := func() (qfLoss, q1Mean, q2Mean float64) {
		// Target policy smoothing (Fujimoto et al. 2018, eq. 14):
		// ã = clip(μ'(s') + clip(ε, −c, c)·scale, low, high), ε ~ N(0, σ²).
		head.ActionTo(nextAct, targetActor.Forward(rb.NextObs, B))
		for i := range nextAct {
			j := i % actDim
			eps := clamp(learnRNG.NormFloat64()*cfg.PolicyNoise, -cfg.NoiseClip, cfg.NoiseClip)
			nextAct[i] = clamp32(nextAct[i]+float32(eps)*head.Scale[j], low[j], high[j])
		}
		q1n, q2n := targets.Forward(rb.NextObs, nextAct, B)
		for i := range B {
			nextQ[i] = rb.Reward[i] + rb.Discount[i]*rb.NotDone[i]*min(q1n[i], q2n[i])
		}
		// Both critics regress onto y: MSE(Q1(s, a), y) + MSE(Q2(s, a), y).
		return critics.Fit(qOpt, qParams, rb.Obs, rb.Action, nextQ, B)
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
		// clip(μ(s) + noise·scale, low, high), noise ~ N(0, σ²) or OU.
		if col.Steps < int64(cfg.LearningStarts) {
			col.RandomActions(exploreRNG)
		} else {
			head.ActionTo(col.Actions, actor.Forward(col.Obs, N))
			if cfg.NoiseType == "ou" {
				offpolicy.AddOUNoise(col.Actions, head.Scale, low, high, ou, exploreRNG)
			} else {
				offpolicy.AddGaussianNoise(col.Actions, head.Scale, low, high, cfg.ExplorationNoise, exploreRNG)
			}
		}
		// Step, store (s, a, r, s', terminated), log, hand obs over.
		if err := col.Step(rt.Log); err != nil {
			return agent, fmt.Errorf("td3: %w", err)
		}
		globalStep := col.Steps
		for i := range N {
			if col.Batch.Done(i) {
				ou.Reset(i*actDim, (i+1)*actDim) // OU restarts with each episode
			}
		}

		if globalStep > int64(cfg.LearningStarts) && rb.Len() >= B {
			if err := rb.Sample(B, sampleRNG); err != nil {
				return agent, fmt.Errorf("td3: sample: %w", err)
			}
			qfLoss, q1Mean, q2Mean := updateCritics()
			updates++
			// Delayed policy updates: the actor and all targets move once
			// every policy_frequency critic updates.
			if updates%int64(cfg.PolicyFrequency) == 0 {
				updateActor()
				if err := offpolicy.PolyakAll(cfg.Tau,
					[2][]*nn.Param{targetActor.Params(), actor.Params()},
					[2][]*nn.Param{qf1Target.Params(), qf1.Params()},
					[2][]*nn.Param{qf2Target.Params(), qf2.Params()}); err != nil {
					return agent, err
				}
				rt.Log.Scalar("losses/actor_loss", actorLoss)
			}
			rt.Log.Scalar("losses/qf1_values", q1Mean)
			rt.Log.Scalar("losses/qf2_values", q2Mean)
			rt.Log.Scalar("losses/qf_loss", qfLoss/2)
		}
		rt.Log.Step(globalStep)
	}
	return agent, nil
}

func clamp(x, lo, hi float64) float64 { return max(lo, min(hi, x)) }

func clamp32(x, lo, hi float32) float32 { return max(lo, min(hi, x)) }
