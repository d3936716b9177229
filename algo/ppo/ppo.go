package ppo

import (
	"context"
	"errors"
	"fmt"
	"math"

	"herd/algo"
	"herd/algo/internal/onpolicy"
	"herd/internal/rng"
	"herd/nn"
)

// ---------------------------------------------------------------------------
// 1. Config (CleanRL ppo.py Args; defaults are CleanRL's)
// ---------------------------------------------------------------------------

// Config holds PPO's settings. The yaml keys are CleanRL's argument names.
type Config struct {
	// Rollout.
	NumEnvs  int `yaml:"num_envs"`  // parallel envs; default 4
	NumSteps int `yaml:"num_steps"` // steps per env per rollout; default 128

	// Optimisation.
	LearningRate   float32 `yaml:"learning_rate"`   // Adam step size; default 2.5e-4
	AnnealLR       bool    `yaml:"anneal_lr"`       // anneal the LR linearly to 0; default true
	AdamEps        float32 `yaml:"adam_eps"`        // Adam ε; default 1e-5
	NumMinibatches int     `yaml:"num_minibatches"` // minibatches per epoch; default 4
	UpdateEpochs   int     `yaml:"update_epochs"`   // epochs per rollout (K); default 4
	MaxGradNorm    float32 `yaml:"max_grad_norm"`   // global grad-norm clip, 0 = off; default 0.5
	TargetKL       float64 `yaml:"target_kl"`       // stop the epochs above this approx KL, 0 = off; default 0

	// Objective.
	Gamma     float32 `yaml:"gamma"`      // discount γ; default 0.99
	GAELambda float32 `yaml:"gae_lambda"` // GAE λ; default 0.95
	NormAdv   bool    `yaml:"norm_adv"`   // normalise advantages per minibatch; default true
	ClipCoef  float32 `yaml:"clip_coef"`  // surrogate clip ε; default 0.2
	ClipVLoss bool    `yaml:"clip_vloss"` // clip the value loss too; default true
	EntCoef   float32 `yaml:"ent_coef"`   // entropy bonus coefficient; default 0.01
	VFCoef    float32 `yaml:"vf_coef"`    // value loss coefficient; default 0.5

	// Networks.
	Hidden     []int   `yaml:"hidden"`       // hidden widths of actor and critic; default [64, 64]
	Activation string  `yaml:"activation"`   // hidden activation; default tanh
	OrthoInit  bool    `yaml:"ortho_init"`   // orthogonal init (gains √2, 0.01, 1); default true
	InitLogStd float32 `yaml:"init_log_std"` // Gaussian log-std at start (Box actions); default 0

	// Execution.
	Parallel bool `yaml:"parallel"` // actor and critic passes on two goroutines (same results); default true
}

// DefaultConfig returns CleanRL's ppo.py defaults.
func DefaultConfig() Config {
	return Config{
		NumEnvs: 4, NumSteps: 128,
		LearningRate: 2.5e-4, AnnealLR: true, AdamEps: 1e-5,
		NumMinibatches: 4, UpdateEpochs: 4, MaxGradNorm: 0.5,
		Gamma: 0.99, GAELambda: 0.95, NormAdv: true,
		ClipCoef: 0.2, ClipVLoss: true, EntCoef: 0.01, VFCoef: 0.5,
		Hidden: []int{64, 64}, Activation: "tanh", OrthoInit: true,
		Parallel: true,
	}
}

// Validate reports every problem with the config, given the run header.
func (c *Config) Validate(h algo.Header) error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: ppo: "+format, append([]any{algo.ErrConfig}, args...)...))
	}
	onpolicy.Common{NumEnvs: c.NumEnvs, NumSteps: c.NumSteps, LearningRate: c.LearningRate,
		MaxGradNorm: c.MaxGradNorm, Gamma: c.Gamma, GAELambda: c.GAELambda, EntCoef: c.EntCoef, VFCoef: c.VFCoef,
		Hidden: c.Hidden, Activation: c.Activation}.Check(bad, h)
	if c.NumMinibatches < 1 {
		bad("num_minibatches must be >= 1, got %d", c.NumMinibatches)
	} else if c.NumEnvs >= 1 && c.NumSteps >= 1 && (c.NumEnvs*c.NumSteps)%c.NumMinibatches != 0 {
		bad("num_minibatches (%d) must divide num_envs × num_steps (%d)", c.NumMinibatches, c.NumEnvs*c.NumSteps)
	}
	if c.UpdateEpochs < 1 {
		bad("update_epochs must be >= 1, got %d", c.UpdateEpochs)
	}
	if !(c.AdamEps > 0) {
		bad("adam_eps must be > 0, got %v", c.AdamEps)
	}
	if c.TargetKL < 0 {
		bad("target_kl must be >= 0, got %v", c.TargetKL)
	}
	if !(c.ClipCoef > 0) {
		bad("clip_coef must be > 0, got %v", c.ClipCoef)
	}
	return errors.Join(errs...)
}

func (c *Config) agentConfig() onpolicy.AgentConfig {
	act, _ := nn.ParseActivation(c.Activation)
	return onpolicy.AgentConfig{Hidden: c.Hidden, Act: act, OrthoInit: c.OrthoInit, InitLogStd: c.InitLogStd,
		Parallel: c.Parallel}
}

// Scalars are the metrics PPO reports (CleanRL's names).
func Scalars() []string {
	return []string{"charts/learning_rate", "losses/value_loss", "losses/policy_loss", "losses/entropy",
		"losses/old_approx_kl", "losses/approx_kl", "losses/clipfrac", "losses/explained_variance"}
}

// Spec describes PPO to the CLI (algo/all).
func Spec() algo.Spec {
	return algo.Spec{
		Name:       "ppo",
		Doc:        "Proximal Policy Optimization (clipped surrogate, GAE), discrete and continuous actions",
		Scalars:    Scalars(),
		NewConfig:  func() algo.Config { c := DefaultConfig(); return &c },
		Train:      onpolicy.TrainFunc("ppo", Train),
		LoadPolicy: LoadPolicy,
	}
}

// ---------------------------------------------------------------------------
// 2. Agent: onpolicy.Agent — separate actor and critic MLPs (64-64 tanh,
// orthogonal init), Categorical or diagonal-Gaussian head. Value(s) and
// ActionAndValue(s) are its intent-named methods; Evaluate + Backward give
// the minibatch log π, entropy, V and their gradients.
// ---------------------------------------------------------------------------

// LoadPolicy rebuilds the deterministic policy from a checkpoint.
func LoadPolicy(path string, h algo.Header, c algo.Config) (algo.Policy, error) {
	return onpolicy.LoadPolicy("ppo", path, h, c, (*Config).agentConfig)
}

// ---------------------------------------------------------------------------
// 3. Train
// ---------------------------------------------------------------------------

// Train runs PPO (Schulman et al. 2017) on rt.Header.Env for rt.Header.Steps
// environment steps, following CleanRL's ppo.py line by line. It returns
// the agent; on cancellation of ctx it stops between iterations and
// returns the agent trained so far with ctx.Err().
func Train(ctx context.Context, rt *algo.Runtime, cfg *Config) (*onpolicy.Agent, error) {
	h := rt.Header
	if err := errors.Join(h.Validate(), cfg.Validate(h)); err != nil {
		return nil, err
	}
	// Sizes.
	batchSize := cfg.NumEnvs * cfg.NumSteps
	mbSize := batchSize / cfg.NumMinibatches
	numIterations := int(h.Steps / int64(batchSize))

	// Seeds: one stream per role (internal/rng).
	rInit := rng.New(h.Seed, "ppo/init", 0)
	rAct := rng.New(h.Seed, "ppo/actor", 0)
	rMB := rng.New(h.Seed, "ppo/minibatch", 0)
	envSeed := int64(rng.Derive(h.Seed, "ppo/env", 0) >> 1)

	// Envs and agent.
	envs, agent, err := onpolicy.Start("ppo", h.Env, cfg.NumEnvs, cfg.agentConfig(), rInit)
	if err != nil {
		return nil, err
	}
	rt.Track(agent) // divergence guard (algo.TrainRun)
	defer envs.Close()
	defer agent.Close() // stops the parallel worker; the agent stays usable

	// Optimizer.
	agent.Reserve(max(mbSize, cfg.NumEnvs))
	opt, err := nn.NewAdam(nn.AdamConfig{LR: cfg.LearningRate, Eps: cfg.AdamEps})
	if err != nil {
		return nil, fmt.Errorf("ppo: %w", err)
	}
	params := agent.Params()

	// Storage.
	ro := onpolicy.NewRollout(cfg.NumSteps, cfg.NumEnvs, agent.ObsDim, agent.ActDim)
	mb := newMinibatch(mbSize, agent.ObsDim, agent.ActDim)
	loss := newLosses(cfg, mb)
	bInds := make([]int, batchSize)
	for i := range bInds {
		bInds[i] = i
	}
	swap := func(i, j int) { bInds[i], bInds[j] = bInds[j], bInds[i] }

	var globalStep int64
	if err := ro.Reset(envs, envSeed); err != nil {
		return nil, fmt.Errorf("ppo: %w", err)
	}
	for iteration := 1; iteration <= numIterations; iteration++ {
		if err := ctx.Err(); err != nil {
			return agent, err
		}
		// Annealing the learning rate: frac = 1 − (iteration−1)/numIterations.
		if cfg.AnnealLR {
			opt.SetLR(nn.LinearSchedule(cfg.LearningRate, 0, iteration-1, numIterations))
		}

		// Rollout: numSteps steps of every env with the current policy.
		if err := ro.Collect(envs, agent, rAct, rt.Log, &globalStep, cfg.Gamma); err != nil {
			return agent, fmt.Errorf("ppo: %w", err)
		}

		// Bootstrap value and GAE (truncations were bootstrapped in Collect).
		ro.Advantages(cfg.Gamma, cfg.GAELambda)

		// Optimizing the policy and value network: K epochs of minibatches.
		loss.reset()
		for epoch := 0; epoch < cfg.UpdateEpochs; epoch++ {
			rMB.Shuffle(len(bInds), swap)
			for start := 0; start < batchSize; start += mbSize {
				mb.gather(ro, bInds[start:start+mbSize])
				update(agent, loss, mb)
				if cfg.MaxGradNorm > 0 {
					nn.ClipGradNorm(params, cfg.MaxGradNorm)
				}
				opt.Step(params)
			}
			// Early stop on the last minibatch's approx KL (CleanRL).
			if cfg.TargetKL > 0 && loss.approxKL > cfg.TargetKL {
				break
			}
		}

		// Log.
		rt.Log.Scalar("charts/learning_rate", float64(opt.LR()))
		rt.Log.Scalar("losses/value_loss", loss.vLoss)
		rt.Log.Scalar("losses/policy_loss", loss.pgLoss)
		rt.Log.Scalar("losses/entropy", loss.entropy)
		rt.Log.Scalar("losses/old_approx_kl", loss.oldApproxKL)
		rt.Log.Scalar("losses/approx_kl", loss.approxKL)
		rt.Log.Scalar("losses/clipfrac", loss.clipFracSum/float64(loss.minibatches))
		rt.Log.Scalar("losses/explained_variance", onpolicy.ExplainedVariance(ro.Values, ro.Returns))
		rt.Log.Step(globalStep)
	}
	return agent, nil
}

// update computes PPO's loss on one minibatch and accumulates its gradient
// into the agent's parameters (CleanRL ppo.py, "Optimizing the policy and
// value network"):
//
//	ratio   = exp(log π(a|s) − log π_old(a|s))
//	L_pg    = mean(max(−Â·ratio, −Â·clip(ratio, 1−ε, 1+ε)))
//	L_v     = ½·mean(max((V−R)², (V_old + clip(V−V_old, −ε, ε) − R)²))   (clip_vloss)
//	L       = L_pg − c_ent·mean(H) + c_vf·L_v
//
// The policy terms depend only on the actor and the value term only on the
// critic, so Agent.Learn computes the two halves side by side (policyLoss,
// valueLoss), each writing its gradient per row with the 1/B of the mean.
func update(agent *onpolicy.Agent, l *losses, mb *minibatch) {
	agent.Learn(mb.obs, mb.actions, mb.size, l.policy, l.value)
}

// losses holds the two halves of PPO's loss as method values bound once
// (so that update does not allocate) and the statistics CleanRL logs: the
// last minibatch's losses and KL estimates, and the clip fraction over all
// minibatches.
type losses struct {
	cfg           *Config
	mb            *minibatch
	policy        onpolicy.PolicyLoss
	value         onpolicy.ValueLoss
	pgLoss, vLoss float64
	entropy       float64
	oldApproxKL   float64
	approxKL      float64
	clipFracSum   float64
	minibatches   int
}

func newLosses(cfg *Config, mb *minibatch) *losses {
	l := &losses{cfg: cfg, mb: mb}
	l.policy, l.value = l.policyLoss, l.valueLoss
	return l
}

// reset clears the per-iteration statistics.
func (l *losses) reset() { l.clipFracSum, l.minibatches = 0, 0 }

// policyLoss: the clipped surrogate and the entropy bonus.
// dL/dlog π = −Â·ratio/B where the unclipped term is the max (the clipped
// one is flat in π), dL/dH = −c_ent/B.
func (l *losses) policyLoss(dLogProb, dEntropy, newLogProb, entropy []float32) {
	mb, cfg := l.mb, l.cfg
	B := len(newLogProb)
	adv := mb.adv
	if cfg.NormAdv {
		adv = onpolicy.NormalizeTo(mb.normAdv, mb.adv)
	}
	invB := 1 / float32(B)
	eps := cfg.ClipCoef
	var pgLoss, entSum, oldKL, kl float64
	clipped := 0
	for r := range B {
		logRatio := newLogProb[r] - mb.logProb[r]
		ratio := float32(math.Exp(float64(logRatio)))
		oldKL += float64(-logRatio)
		kl += float64((ratio - 1) - logRatio)
		if ratio-1 > eps || 1-ratio > eps {
			clipped++
		}
		// The pessimistic (max) of the two surrogate losses.
		pg1 := -adv[r] * ratio
		pg2 := -adv[r] * min(max(ratio, 1-eps), 1+eps)
		if pg1 >= pg2 {
			pgLoss += float64(pg1)
			dLogProb[r] = -adv[r] * ratio * invB // d ratio / d log π = ratio
		} else {
			pgLoss += float64(pg2)
			dLogProb[r] = 0
		}
		// Entropy bonus.
		entSum += float64(entropy[r])
		dEntropy[r] = -cfg.EntCoef * invB
	}
	n := float64(B)
	l.pgLoss, l.entropy = pgLoss/n, entSum/n
	l.oldApproxKL, l.approxKL = oldKL/n, kl/n
	l.clipFracSum += float64(clipped) / n
	l.minibatches++
}

// valueLoss: ½·(V−R)², or with clip_vloss the max of that and the clipped
// version. dL/dV = c_vf·(V−R)/B, or c_vf·(V_clipped−R)/B when the clipped
// term is the max and V−V_old is inside the clip range (else 0).
func (l *losses) valueLoss(dValue, newValue []float32) {
	mb, cfg := l.mb, l.cfg
	B := len(newValue)
	invB := 1 / float32(B)
	eps := cfg.ClipCoef
	var vLoss float64
	for r := range B {
		v, ret := newValue[r], mb.returns[r]
		vUnclipped := (v - ret) * (v - ret)
		if !cfg.ClipVLoss {
			vLoss += float64(vUnclipped)
			dValue[r] = cfg.VFCoef * (v - ret) * invB
			continue
		}
		dv := v - mb.values[r]
		vClip := mb.values[r] + min(max(dv, -eps), eps)
		vClipped := (vClip - ret) * (vClip - ret)
		switch {
		case vUnclipped >= vClipped:
			vLoss += float64(vUnclipped)
			dValue[r] = cfg.VFCoef * (v - ret) * invB
		case dv > -eps && dv < eps:
			vLoss += float64(vClipped)
			dValue[r] = cfg.VFCoef * (vClip - ret) * invB
		default:
			vLoss += float64(vClipped)
			dValue[r] = 0 // the clipped value is flat in V
		}
	}
	l.vLoss = 0.5 * vLoss / float64(B)
}

// minibatch holds one minibatch gathered from the flattened rollout (CleanRL
// b_obs[mb_inds] …).
type minibatch struct {
	size                                   int
	obsDim, actDim                         int
	obs, actions                           []float32
	logProb, adv, normAdv, returns, values []float32
	newLogProb, entropy, newValue          []float32
	dLogProb, dEntropy, dValue             []float32
}

func newMinibatch(size, obsDim, actDim int) *minibatch {
	f := func(n int) []float32 { return make([]float32, n) }
	return &minibatch{size: size, obsDim: obsDim, actDim: actDim,
		obs: f(size * obsDim), actions: f(size * actDim),
		logProb: f(size), adv: f(size), normAdv: f(size), returns: f(size), values: f(size)}
}

// gather copies the rows inds of the rollout into the minibatch.
func (mb *minibatch) gather(ro *onpolicy.Rollout, inds []int) {
	od, ad := mb.obsDim, mb.actDim
	for r, k := range inds {
		copy(mb.obs[r*od:(r+1)*od], ro.Obs[k*od:(k+1)*od])
		copy(mb.actions[r*ad:(r+1)*ad], ro.Actions[k*ad:(k+1)*ad])
		mb.logProb[r] = ro.LogProbs[k]
		mb.adv[r] = ro.Adv[k]
		mb.returns[r] = ro.Returns[k]
		mb.values[r] = ro.Values[k]
	}
}
