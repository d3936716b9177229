package reinforce

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"

	"herd/algo"
	"herd/env"
	"herd/internal/rng"
	"herd/internal/scratch"
	"herd/nn"
	"herd/rollout"
	"herd/sample"
	"herd/weights"
)

// ---------------------------------------------------------------------------
// 1. Config: the algorithm's section of a run config.
// ---------------------------------------------------------------------------

// Config holds REINFORCE's settings.
type Config struct {
	NumEnvs      int     `yaml:"num_envs"`      // envs stepped together; default 4
	NumSteps     int     `yaml:"num_steps"`     // steps per env per update (the segment length T); default 128
	LearningRate float32 `yaml:"learning_rate"` // Adam step size; default 1e-2
	Gamma        float32 `yaml:"gamma"`         // discount γ; default 0.99
	Hidden       []int   `yaml:"hidden"`        // hidden widths of the policy MLP; default [32]
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{NumEnvs: 4, NumSteps: 128, LearningRate: 1e-2, Gamma: 0.99, Hidden: []int{32}}
}

// Validate reports every problem with the config (algo.Config).
func (c *Config) Validate(h algo.Header) error {
	var errs []error
	if c.NumEnvs < 1 || c.NumSteps < 1 {
		errs = append(errs, fmt.Errorf("%w: reinforce: num_envs %d and num_steps %d must be ≥ 1", algo.ErrConfig, c.NumEnvs, c.NumSteps))
	}
	if !(c.LearningRate > 0) || !(c.Gamma >= 0 && c.Gamma <= 1) {
		errs = append(errs, fmt.Errorf("%w: reinforce: learning_rate %v must be > 0 and gamma %v in [0, 1]", algo.ErrConfig, c.LearningRate, c.Gamma))
	}
	for _, w := range c.Hidden {
		if w < 1 {
			errs = append(errs, fmt.Errorf("%w: reinforce: hidden widths must be ≥ 1, got %v", algo.ErrConfig, c.Hidden))
			break
		}
	}
	return errors.Join(errs...)
}

// RolloutShape makes the config an algo.Rollout: what an executor that
// gathers segments for a segment learner needs to know.
func (c *Config) RolloutShape() (numEnvs, numSteps int, gamma float32) {
	return c.NumEnvs, c.NumSteps, c.Gamma
}

// ---------------------------------------------------------------------------
// 2. Spec: what the CLI and the executors know of the algorithm.
// ---------------------------------------------------------------------------

// Spec describes REINFORCE. Can says what its pieces can do; the executors
// that run it follow from that (algo.Admit), with no executor code naming
// it.
func Spec() algo.Spec {
	return algo.Spec{
		Name:    "reinforce",
		Doc:     "REINFORCE (Williams 1992): Monte-Carlo policy gradient, normalised returns as the baseline, discrete actions",
		Can:     algo.CanSegmentLearner | algo.CanAgentRows | algo.CanStatelessPolicy,
		Scalars: []string{"losses/policy_loss", "charts/return_std"},
		NewConfig: func() algo.Config {
			c := DefaultConfig()
			return &c
		},
		Train:      Train,
		LoadPolicy: LoadPolicy,
		Pieces: func(h algo.Header, c algo.Config, sp algo.Spaces) (*algo.Pieces, error) {
			cfg, err := algo.ConfigAs[*Config]("reinforce", c, h)
			if err != nil {
				return nil, err
			}
			return Pieces(h, cfg, sp)
		},
	}
}

// ---------------------------------------------------------------------------
// 3. Pieces: policy, sampler, learner.
// ---------------------------------------------------------------------------

// newNet builds the policy network, obs → one logit per action, drawn from
// the run seed's stream for "reinforce/init": every piece built for a run
// starts from the same weights.
func newNet(h algo.Header, cfg *Config, sp algo.Spaces) (*nn.MLP, int, error) {
	act, ok := sp.Act.(env.Discrete)
	if !ok {
		return nil, 0, fmt.Errorf("%w: reinforce: action space %v; REINFORCE here needs a Discrete one", algo.ErrConfig, sp.Act)
	}
	net, err := nn.NewMLP(nn.MLPConfig{In: sp.Obs.Dim(), Hidden: cfg.Hidden, Out: act.N, Act: nn.Tanh},
		rng.New(h.Seed, "reinforce/init", 0))
	return net, act.N, err
}

// Pieces cuts REINFORCE into a policy (logits, and a zero column where an
// actor-critic has V(s): REINFORCE has no critic, so nothing is
// bootstrapped), a sampler drawing from the softmax, and the learner.
func Pieces(h algo.Header, cfg *Config, sp algo.Spaces) (*algo.Pieces, error) {
	if _, _, err := newNet(h, cfg, sp); err != nil {
		return nil, err
	}
	start := float32(sp.Act.(env.Discrete).Start)
	return &algo.Pieces{
		NewPolicy: func() (algo.PolicyNet, error) {
			net, n, err := newNet(h, cfg, sp)
			return &policy{net: net, n: n}, err
		},
		NewSampler: func(_ int, r *rand.Rand) (algo.Sampler, error) {
			_, n, err := newNet(h, cfg, sp)
			return &sampler{n: n, start: start, r: r}, err
		},
		NewSegmentLearner: func() (algo.SegmentLearner, error) {
			net, n, err := newNet(h, cfg, sp)
			if err != nil {
				return nil, err
			}
			opt, err := nn.NewAdam(nn.AdamConfig{LR: cfg.LearningRate, Eps: 1e-8})
			if err != nil {
				return nil, err
			}
			return &learner{net: net, n: n, opt: opt, gamma: cfg.Gamma, start: start}, nil
		},
		DecodeWeights: func(b []byte) (*weights.Version, error) {
			net, _, err := newNet(h, cfg, sp)
			if err != nil {
				return nil, err
			}
			return weights.Decode(b, net.Params())
		},
	}, nil
}

// policy is the batched forward pass (algo.PolicyNet): row i of the
// outputs is the n logits of observation i, then 0 in the value column.
type policy struct {
	net     *nn.MLP
	n       int
	version uint64
}

func (p *policy) OutDim() int     { return p.n + 1 }
func (p *policy) Version() uint64 { return p.version }

func (p *policy) SetWeights(v *weights.Version) error {
	if err := v.CopyTo(p.net.Params()); err != nil {
		return err
	}
	p.version = v.N
	return nil
}

func (p *policy) ForwardTo(dst, obs []float32, n int) []float32 {
	logits := p.net.Forward(obs, n)
	w := p.n + 1
	for i := range n {
		copy(dst[i*w:i*w+p.n], logits[i*p.n:(i+1)*p.n])
		dst[i*w+p.n] = 0
	}
	return dst[:n*w]
}

// sampler draws each row's action from its softmax with the env worker's
// stream and records log π(a|s) (algo.Sampler).
type sampler struct {
	n      int
	start  float32
	r      *rand.Rand
	logits []float32
	logp   []float32
}

func (s *sampler) SampleTo(dst *algo.Acts, out []float32, n int, _ int64) {
	for _, b := range []*[]float32{&dst.Actions, &dst.EnvActions, &dst.LogProbs, &dst.Values} {
		if cap(*b) < n {
			*b = make([]float32, n)
		}
		*b = (*b)[:n]
	}
	if cap(s.logp) < s.n {
		s.logits, s.logp = make([]float32, s.n), make([]float32, s.n)
	}
	head := nn.Categorical{N: s.n}
	for i := range n {
		copy(s.logits, out[i*(s.n+1):i*(s.n+1)+s.n])
		head.LogSoftmaxTo(s.logp, s.logits)
		u, a := s.r.Float64(), s.n-1
		for j := range s.n {
			if u -= math.Exp(float64(s.logp[j])); u < 0 {
				a = j
				break
			}
		}
		dst.Actions[i], dst.EnvActions[i] = float32(a), float32(a)+s.start
		dst.LogProbs[i], dst.Values[i] = s.logp[a], 0
	}
}

// learner takes one policy-gradient step per segment (algo.SegmentLearner,
// algo.Modeler): with G_t the discounted return from step t to the end of
// its episode or of the segment, and Â_t = (G_t − mean G) / std G,
//
//	L(θ) = −(1/TN) Σ_t Â_t · log π_θ(a_t | s_t).
type learner struct {
	net            *nn.MLP
	n              int
	opt            nn.Optimizer
	gamma, start   float32
	updates        uint64
	ret, dlogp, dz []float32
	logp           []float32
	actions        []int
}

func (l *learner) Learn(ctx context.Context, seg *sample.Segment) ([]algo.Stat, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := seg.Check(); err != nil {
		return nil, err
	}
	tn := seg.T * seg.N
	l.ret, l.dlogp, l.logp = scratch.Resize(l.ret, tn), scratch.Resize(l.dlogp, tn), scratch.Resize(l.logp, tn)
	l.dz = scratch.Resize(l.dz, tn*l.n)
	if cap(l.actions) < tn {
		l.actions = make([]int, tn)
	}
	l.actions = l.actions[:tn]
	for k, a := range seg.Actions {
		if !(a >= 0 && a < float32(l.n)) || a != float32(int(a)) {
			return nil, fmt.Errorf("%w: reinforce: action %d is %v, not an index below %d", sample.ErrShape, k, a, l.n)
		}
		l.actions[k] = int(a)
	}
	// Returns, time-major rows t·N + i, cut where an episode ended.
	for i := range seg.N {
		var g float32
		for t := seg.T - 1; t >= 0; t-- {
			k := t*seg.N + i
			if seg.Dones[k] != 0 {
				g = 0
			}
			g = seg.Rewards[k] + l.gamma*g
			l.ret[k] = g
		}
	}
	var mean, sq float64
	for _, g := range l.ret {
		mean += float64(g)
	}
	mean /= float64(tn)
	for _, g := range l.ret {
		sq += (float64(g) - mean) * (float64(g) - mean)
	}
	std := math.Sqrt(sq/float64(tn)) + 1e-8
	head := nn.Categorical{N: l.n}
	logits := l.net.Forward(seg.Obs, tn)
	head.LogProbTo(l.logp, logits, l.actions)
	var loss float64
	for k, g := range l.ret {
		adv := (float64(g) - mean) / std
		loss -= adv * float64(l.logp[k]) / float64(tn)
		l.dlogp[k] = float32(-adv / float64(tn))
	}
	head.Backward(l.dz, logits, l.actions, l.dlogp, nil)
	l.net.ZeroGrad()
	l.net.Backward(l.dz)
	l.opt.Step(l.net.Params())
	l.updates++
	return []algo.Stat{{Name: "losses/policy_loss", Value: loss}, {Name: "charts/return_std", Value: std}}, nil
}

func (l *learner) Weights() *weights.Version { return weights.New(l.updates, l.net.Params()) }
func (l *learner) Close() error              { return nil }
func (l *learner) Model() algo.Model         { return &model{net: l.net, n: l.n, start: l.start} }

// ---------------------------------------------------------------------------
// 4. Model, checkpoint and the local loop.
// ---------------------------------------------------------------------------

// model acts greedily (algo.Model) and saves the network as safetensors.
type model struct {
	net   *nn.MLP
	n     int
	start float32
}

func (m *model) Act(dst, obs []float32) []float32 {
	logits := m.net.Forward(obs, 1)
	best := 0
	for j := 1; j < m.n; j++ {
		if logits[j] > logits[best] {
			best = j
		}
	}
	dst[0] = float32(best) + m.start
	return dst
}

// Params makes the model an algo.ParamModel, watched for divergence.
func (m *model) Params() []*nn.Param { return m.net.Params() }

func (m *model) Save(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := nn.Save(f, m.net.Params(), nil); err != nil {
		f.Close()
		return fmt.Errorf("reinforce: %w", err)
	}
	return f.Close()
}

// LoadPolicy rebuilds the greedy policy from a checkpoint (Spec.LoadPolicy).
func LoadPolicy(path string, h algo.Header, c algo.Config) (algo.Policy, error) {
	cfg, err := algo.ConfigAs[*Config]("reinforce", c, h)
	if err != nil {
		return nil, err
	}
	e, err := env.Make(h.Env)
	if err != nil {
		return nil, err
	}
	sp := algo.SpacesOf(e)
	e.Close()
	net, n, err := newNet(h, cfg, sp)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := nn.Load(f, net.Params()); err != nil {
		return nil, fmt.Errorf("reinforce: %w", err)
	}
	return &model{net: net, n: n, start: float32(sp.Act.(env.Discrete).Start)}, nil
}

// Train is the local executor's loop, the shortest composition of the
// pieces: gather a segment, learn from it, act with the new weights.
func Train(ctx context.Context, rt *algo.Runtime, c algo.Config) (algo.Model, error) {
	h := rt.Header
	cfg, err := algo.ConfigAs[*Config]("reinforce", c, h)
	if err != nil {
		return nil, err
	}
	envs, err := rt.MakeEnvs(cfg.NumEnvs)
	if err != nil {
		return nil, err
	}
	defer envs.Close()
	pieces, err := Pieces(h, cfg, algo.SpacesOf(envs))
	if err != nil {
		return nil, err
	}
	pol, err := pieces.NewPolicy()
	if err != nil {
		return nil, err
	}
	smp, err := pieces.NewSampler(cfg.NumEnvs, rng.New(h.Seed, "env-worker", 0))
	if err != nil {
		return nil, err
	}
	sl, err := pieces.NewSegmentLearner()
	if err != nil {
		return nil, err
	}
	m := sl.(algo.Modeler).Model()
	rt.Track(m)
	w := rollout.NewSegments(0, envs, rollout.NewInline(pol, smp), cfg.Gamma)
	if err := w.Reset(int64(h.Seed)); err != nil {
		return nil, err
	}
	seg := sample.NewSegment(cfg.NumSteps, cfg.NumEnvs, envs.ObservationSpace().Dim(), 1)
	var step int64
	for step+int64(cfg.NumSteps*cfg.NumEnvs) <= h.Steps {
		if err := ctx.Err(); err != nil {
			return m, err
		}
		if err := w.Collect(seg); err != nil {
			return m, err
		}
		stats, err := sl.Learn(ctx, seg)
		if err != nil {
			return m, err
		}
		if err := pol.SetWeights(sl.Weights()); err != nil {
			return m, err
		}
		step = rollout.LogEpisodes(rt.Log, seg, step)
		for _, s := range stats {
			rt.Log.Scalar(s.Name, s.Value)
		}
		rt.Log.Step(step)
	}
	return m, nil
}
