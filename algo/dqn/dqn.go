package dqn

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"herd/algo"
	"herd/algo/internal/offpolicy"
	"herd/env"
	"herd/internal/rng"
	"herd/internal/twin"
	"herd/nn"
)

// Config is DQN's section of a run configuration. Defaults are CleanRL's
// dqn.py (CartPole-v1); a zero written in the file stays zero.
type Config struct {
	// --- run ---

	// NumEnvs is the number of environments stepped together. Default 1.
	NumEnvs int `yaml:"num_envs"`

	// --- algorithm ---

	// LearningRate of Adam. Default 2.5e-4.
	LearningRate float64 `yaml:"learning_rate"`
	// AnnealLR decays the learning rate linearly to 0 over the run (as
	// CleanRL's PPO does), which damps DQN's late collapses. Default false.
	AnnealLR bool `yaml:"anneal_lr"`
	// BufferSize is the replay memory size. Default 10000.
	BufferSize int `yaml:"buffer_size"`
	// Gamma is the discount γ. Default 0.99.
	Gamma float64 `yaml:"gamma"`
	// Tau is the target update rate τ: 1 copies the Q-network every
	// TargetNetworkFrequency steps (hard update), < 1 is Polyak averaging.
	// Default 1.
	Tau float64 `yaml:"tau"`
	// TargetNetworkFrequency is the number of steps between target updates.
	// Default 500.
	TargetNetworkFrequency int `yaml:"target_network_frequency"`
	// BatchSize is the minibatch size sampled from replay. Default 128.
	BatchSize int `yaml:"batch_size"`
	// StartE and EndE are ε at the start and end of the exploration
	// schedule. Defaults 1 and 0.05.
	StartE float64 `yaml:"start_e"`
	EndE   float64 `yaml:"end_e"`
	// ExplorationFraction is the fraction of the run over which ε falls
	// linearly from StartE to EndE. Default 0.5.
	ExplorationFraction float64 `yaml:"exploration_fraction"`
	// LearningStarts is the step at which training starts. Default 10000.
	LearningStarts int `yaml:"learning_starts"`
	// TrainFrequency is the number of steps between training rounds.
	// Default 10.
	TrainFrequency int `yaml:"train_frequency"`
	// GradientSteps is the number of gradient steps per training round
	// (Stable-Baselines3's gradient_steps). Default 1.
	GradientSteps int `yaml:"gradient_steps"`
	// NetArch lists the hidden layer widths of the Q-network (ReLU).
	// Default [120, 84].
	NetArch []int `yaml:"net_arch"`
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
}

// NewConfig returns CleanRL's dqn.py defaults.
func NewConfig() *Config {
	return &Config{
		NumEnvs:                1,
		LearningRate:           2.5e-4,
		BufferSize:             10000,
		Gamma:                  0.99,
		Tau:                    1,
		TargetNetworkFrequency: 500,
		BatchSize:              128,
		StartE:                 1,
		EndE:                   0.05,
		ExplorationFraction:    0.5,
		LearningStarts:         10000,
		TrainFrequency:         10,
		GradientSteps:          1,
		NetArch:                []int{120, 84},
		Loss:                   "mse",
		NSteps:                 1,
		PriorityAlpha:          0.6,
		PriorityBeta:           0.4,
		PriorityEps:            1e-6,
	}
}

// Validate reports every problem with the configuration.
func (c *Config) Validate(h algo.Header) error {
	var errs []error
	bad := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("%w: dqn: "+format, append([]any{algo.ErrConfig}, a...)...))
	}
	offpolicy.Common{NumEnvs: c.NumEnvs, BatchSize: c.BatchSize, BufferSize: c.BufferSize,
		LearningStarts: c.LearningStarts, Gamma: c.Gamma, Tau: c.Tau, NetArch: c.NetArch}.Check(bad)
	if !(c.LearningRate > 0) {
		bad("learning_rate must be > 0, got %v", c.LearningRate)
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
	if h.Env != "" {
		if e, err := env.Make(h.Env); err != nil {
			bad("env %q: %v", h.Env, err)
		} else {
			if _, ok := e.ActionSpace().(env.Discrete); !ok {
				bad("env %s has action space %v; DQN needs a Discrete one", h.Env, e.ActionSpace())
			}
			e.Close()
		}
	}
	return errors.Join(errs...)
}

// Scalars are the metrics.csv columns DQN writes.
var Scalars = []string{"losses/td_loss", "losses/q_values", "charts/epsilon"}

// Spec describes DQN to the CLI.
func Spec() algo.Spec {
	return algo.Spec{
		Name:      "dqn",
		Doc:       "Deep Q-Network (Mnih et al. 2015) with Double-Q, prioritized replay and n-step options",
		Scalars:   Scalars,
		NewConfig: func() algo.Config { return NewConfig() },
		Train: func(ctx context.Context, rt *algo.Runtime, c algo.Config) (algo.Model, error) {
			return Train(ctx, rt, c.(*Config))
		},
		LoadPolicy: LoadPolicy,
	}
}

// Agent is the Q-network Q(s, ·; θ) with one output per action. As a policy
// it acts greedily: a = argmax_a Q(s, a).
type Agent struct {
	Q        *nn.MLP
	nActions int
	greedy   [1]int
}

// newAgent builds the Q-network, initialised as PyTorch's nn.Linear.
func newAgent(obsDim, nActions int, arch []int, r *rand.Rand) (*Agent, error) {
	q, err := nn.NewMLP(nn.MLPConfig{In: obsDim, Hidden: arch, Out: nActions, Act: nn.ReLU}, r)
	if err != nil {
		return nil, err
	}
	return &Agent{Q: q, nActions: nActions}, nil
}

// Act writes the greedy action for one observation into dst[0].
func (a *Agent) Act(dst, obs []float32) []float32 {
	nn.ArgmaxTo(a.greedy[:], a.Q.Forward(obs, 1), a.nActions)
	dst[0] = float32(a.greedy[0])
	return dst
}

// Params returns the parameters Save writes (algo.ParamModel).
func (a *Agent) Params() []*nn.Param { return a.Q.Params() }

// Save writes the Q-network to path (safetensors).
func (a *Agent) Save(path string) error {
	return nn.SaveFile(path, a.Q.Params(), map[string]string{"algo": "dqn"})
}

// LoadPolicy rebuilds the greedy policy saved by Agent.Save.
func LoadPolicy(path string, h algo.Header, c algo.Config) (algo.Policy, error) {
	cfg, ok := c.(*Config)
	if !ok {
		return nil, fmt.Errorf("%w: dqn: config is %T", algo.ErrConfig, c)
	}
	e, err := env.Make(h.Env)
	if err != nil {
		return nil, err
	}
	defer e.Close()
	d, ok := e.ActionSpace().(env.Discrete)
	if !ok {
		return nil, fmt.Errorf("%w: dqn: env %s has no Discrete action space", algo.ErrConfig, h.Env)
	}
	agent, err := newAgent(e.ObservationSpace().Dim(), d.N, cfg.NetArch, rng.New(h.Seed, "dqn/init", 0))
	if err != nil {
		return nil, err
	}
	if _, err := nn.LoadFile(path, agent.Q.Params()); err != nil {
		return nil, fmt.Errorf("dqn: load %s: %w", path, err)
	}
	return agent, nil
}

// Train runs DQN for rt.Header.Steps environment steps.
func Train(ctx context.Context, rt *algo.Runtime, cfg *Config) (algo.Model, error) {
	if err := cfg.Validate(rt.Header); err != nil {
		return nil, err
	}
	h := rt.Header
	seed := h.Seed

	// Environments: N copies stepped in this goroutine, episode statistics
	// recorded outside the time limit so truncated episodes are reported.
	envs, err := env.MakeVector(h.Env, cfg.NumEnvs, env.Sync, env.WithEpisodeStatistics())
	if err != nil {
		return nil, err
	}
	defer envs.Close()
	obsDim := envs.ObservationSpace().Dim()
	nActions := envs.ActionSpace().(env.Discrete).N
	N := cfg.NumEnvs

	// Agent, target network and optimizer.
	agent, err := newAgent(obsDim, nActions, cfg.NetArch, rng.New(seed, "dqn/init", 0))
	if err != nil {
		return nil, err
	}
	rt.Track(agent) // divergence guard (algo.TrainRun)
	q := agent.Q
	target := q.Clone()
	opt, err := nn.NewAdam(nn.AdamConfig{LR: float32(cfg.LearningRate)})
	if err != nil {
		return nil, err
	}
	rb, err := offpolicy.NewReplay(offpolicy.ReplayConfig{
		Capacity: cfg.BufferSize, ObsDim: obsDim, ActDim: 1, NumEnvs: N,
		NSteps: cfg.NSteps, Gamma: cfg.Gamma,
		Prioritized: cfg.Prioritized, Alpha: cfg.PriorityAlpha, Beta: cfg.PriorityBeta, Eps: cfg.PriorityEps,
	})
	if err != nil {
		return nil, fmt.Errorf("dqn: replay: %w", err)
	}
	exploreRNG := rng.New(seed, "dqn/explore", 0)
	sampleRNG := rng.New(seed, "dqn/replay", 0)

	// Learner workspaces, sized once.
	B := cfg.BatchSize
	var (
		bActions  = make([]int, B)
		qPred     = make([]float32, B) // Q(s, a; θ)
		targetMax = make([]float32, B) // max_a' Q(s', a'; θ⁻), or Q(s', argmax_a' Q(s', a'; θ); θ⁻)
		nextAct   = make([]int, B)
		tdTarget  = make([]float32, B)
		tdErr     = make([]float32, B)
		dPred     = make([]float32, B)
		dQ        = make([]float32, B*nActions)
		actions   = make([]float32, N)
		greedy    = make([]int, N)
	)
	q.Reserve(B)
	target.Reserve(B)
	explorationSteps := int(cfg.ExplorationFraction * float64(h.Steps))
	// par runs the target network's forward pass beside the online one's,
	// so a training step uses both cores (results are identical without
	// it: see package twin).
	par := twin.New()
	defer par.Close()
	var qNext []float32 // Q(s', ·; θ⁻), written by targetForward
	targetForward := func() { qNext = target.Forward(rb.NextObs, B) }

	// train runs one gradient step on a sampled minibatch and returns the
	// loss and the mean Q(s, a) of the batch.
	train := func(globalStep int64) (loss, meanQ float64, err error) {
		if cfg.AnnealLR {
			frac := 1 - float64(globalStep)/float64(h.Steps)
			opt.SetLR(float32(frac * cfg.LearningRate))
		}
		if cfg.Prioritized {
			// β anneals linearly to 1 over the run (Schaul et al. 2016, §3.4).
			beta := offpolicy.LinearSchedule(cfg.PriorityBeta, 1, int(h.Steps), int(globalStep))
			if err := rb.SetBeta(beta); err != nil {
				return 0, 0, err
			}
		}
		if err := rb.Sample(B, sampleRNG); err != nil {
			return 0, 0, err
		}
		for i := range B {
			bActions[i] = int(rb.Action[i])
		}
		// The TD target, without gradient through θ⁻: the target network's
		// forward runs on the worker while this goroutine runs the online
		// network's (they share only the read-only batch).
		par.Go(targetForward)
		if cfg.DoubleQ {
			nn.ArgmaxTo(nextAct, q.Forward(rb.NextObs, B), nActions)
		}
		qAll := q.Forward(rb.Obs, B)
		nn.GatherTo(qPred, qAll, nActions, bActions)
		par.Wait()
		if cfg.DoubleQ {
			nn.GatherTo(targetMax, qNext, nActions, nextAct)
		} else {
			nn.MaxTo(targetMax, qNext, nActions)
		}
		// y = r + γ^m (1 − terminated) max_a' Q(s', a'; θ⁻)
		for i := range B {
			tdTarget[i] = rb.Reward[i] + rb.Discount[i]*rb.NotDone[i]*targetMax[i]
		}
		var l float32
		w := rb.Weight
		if !cfg.Prioritized {
			w = nil // uniform replay: all weights are 1
		}
		if cfg.Loss == "huber" {
			l = nn.WeightedHuber(dPred, qPred, tdTarget, w, 1)
		} else {
			l = nn.WeightedMSE(dPred, qPred, tdTarget, w)
		}
		nn.ScatterTo(dQ, nActions, bActions, dPred)
		q.ZeroGrad()
		q.BackwardSplit(dQ, par, false) // dW on the worker beside dX; no dL/d(obs)
		if cfg.MaxGradNorm > 0 {
			nn.ClipGradNorm(q.Params(), float32(cfg.MaxGradNorm))
		}
		opt.Step(q.Params())
		var sumQ float64
		for i := range B {
			tdErr[i] = qPred[i] - tdTarget[i]
			sumQ += float64(qPred[i])
		}
		if err := rb.UpdatePriorities(tdErr); err != nil {
			return 0, 0, err
		}
		return float64(l), sumQ / float64(B), nil
	}

	batch, err := envs.Reset(int64(seed & math.MaxInt64)) // a negative seed would mean NoSeed
	if err != nil {
		return nil, err
	}
	obs := make([]float32, N*obsDim) // s_t, kept because batch.Obs is overwritten by Step
	copy(obs, batch.Obs)
	var globalStep int64
	for globalStep < h.Steps {
		if ctx.Err() != nil {
			return agent, ctx.Err()
		}
		// ε-greedy action selection. The Q-network runs only for the envs
		// that exploit, as CleanRL's does.
		eps := offpolicy.LinearSchedule(cfg.StartE, cfg.EndE, explorationSteps, int(globalStep))
		for i := range N {
			if exploreRNG.Float64() < eps {
				actions[i] = float32(exploreRNG.IntN(nActions))
			} else {
				nn.ArgmaxTo(greedy[i:i+1], q.Forward(obs[i*obsDim:(i+1)*obsDim], 1), nActions)
				actions[i] = float32(greedy[i])
			}
		}
		batch, err = envs.Step(actions)
		if err != nil {
			return agent, err
		}
		prevStep := globalStep
		globalStep += int64(N)

		// Store transitions. NextObsRow is the true final observation when
		// an episode ended: on truncation the target bootstraps from it.
		for i := range N {
			if err := rb.Store(i, obs[i*obsDim:(i+1)*obsDim], actions[i:i+1], batch.Rewards[i],
				batch.NextObsRow(i), batch.Terminated[i], batch.Truncated[i]); err != nil {
				return agent, fmt.Errorf("dqn: store: %w", err)
			}
			if batch.Infos[i].HasEpisode {
				rt.Log.Episode(globalStep, batch.Infos[i].Episode.Return, batch.Infos[i].Episode.Length)
			}
		}
		// The easy-to-miss hand-off: act next on the new observations
		// (the first of a new episode where one ended).
		copy(obs, batch.Obs)

		// Training.
		if globalStep > int64(cfg.LearningStarts) && rb.Len() >= B {
			if offpolicy.Crossed(prevStep, globalStep, int64(cfg.TrainFrequency)) {
				for range cfg.GradientSteps {
					loss, meanQ, err := train(globalStep)
					if err != nil {
						return agent, fmt.Errorf("dqn: train: %w", err)
					}
					rt.Log.Scalar("losses/td_loss", loss)
					rt.Log.Scalar("losses/q_values", meanQ)
				}
				rt.Log.Scalar("charts/epsilon", eps)
			}
			// Target update: θ⁻ ← τθ + (1 − τ)θ⁻ every target_network_frequency steps.
			if offpolicy.Crossed(prevStep, globalStep, int64(cfg.TargetNetworkFrequency)) {
				if err := nn.PolyakUpdate(target.Params(), q.Params(), float32(cfg.Tau)); err != nil {
					return agent, err
				}
			}
		}
		rt.Log.Step(globalStep)
	}
	return agent, nil
}
