// Package algotest is a test double of an algorithm (algo.Spec): a small
// fake on-policy algorithm named "fake" on CartPole for the tests of the
// worker roles, the executors and herd launch: a linear policy (logit w·obs, value
// = the weights version), a Bernoulli sampler, and a learner that nudges w
// against the pole angle so the weights change every iteration. It checks
// plumbing, not learning.
package algotest

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"

	"herd/algo"
	"herd/nn"
	"herd/sample"
	"herd/weights"
)

// Policy is the fake algo.PolicyNet.
type Policy struct {
	w []*nn.Param
	n uint64
}

// NewParams returns the model's parameters (one tensor "w" of 4).
func NewParams() []*nn.Param {
	return []*nn.Param{{Name: "w", Shape: []int{4}, Value: make([]float32, 4)}}
}

func (p *Policy) OutDim() int     { return 2 }
func (p *Policy) Version() uint64 { return p.n }
func (p *Policy) SetWeights(v *weights.Version) error {
	if err := v.CopyTo(p.w); err != nil {
		return err
	}
	p.n = v.N
	return nil
}
func (p *Policy) ForwardTo(dst, obs []float32, n int) []float32 {
	w := p.w[0].Value
	for i := range n {
		var s float32
		for k := range 4 {
			s += w[k] * obs[i*4+k]
		}
		dst[2*i], dst[2*i+1] = s, float32(p.n)
	}
	return dst[:2*n]
}

// Sampler is the fake algo.Sampler (and worker.Valuer).
type Sampler struct{ r *rand.Rand }

func (s *Sampler) SampleTo(dst *algo.Acts, out []float32, n int, _ int64) {
	for _, b := range []*[]float32{&dst.Actions, &dst.EnvActions, &dst.LogProbs, &dst.Values} {
		if cap(*b) < n {
			*b = make([]float32, n)
		}
		*b = (*b)[:n]
	}
	for i := range n {
		p1 := 1 / (1 + math.Exp(-float64(out[2*i])))
		a := float32(0)
		if s.r.Float64() < p1 {
			a = 1
		}
		dst.Actions[i], dst.EnvActions[i] = a, a
		dst.LogProbs[i] = float32(math.Log(max(1e-9, p1*float64(a)+(1-p1)*float64(1-a))))
		dst.Values[i] = out[2*i+1]
	}
}
func (s *Sampler) ValuesTo(dst, out []float32, n int) {
	for i := range n {
		dst[i] = out[2*i+1]
	}
}

// Learner is the fake algo.SegmentLearner; Model hands out a Model.
type Learner struct {
	w []*nn.Param
	n uint64
}

func (l *Learner) Learn(_ context.Context, seg *sample.Segment) ([]algo.Stat, error) {
	if err := seg.Check(); err != nil {
		return nil, err
	}
	for i := range seg.T * seg.N {
		l.w[0].Value[2] -= 0.001 * seg.Obs[i*4+2] * (2*seg.Actions[i] - 1)
	}
	l.n++
	return []algo.Stat{{Name: "n", Value: float64(l.n)}}, nil
}
func (l *Learner) Weights() *weights.Version { return weights.New(l.n, l.w) }

// Pieces returns the fake algorithm cut into pieces.
func Pieces() *algo.Pieces {
	return &algo.Pieces{
		NewPolicy:         func() (algo.PolicyNet, error) { return &Policy{w: NewParams()}, nil },
		NewSampler:        func(_ int, r *rand.Rand) (algo.Sampler, error) { return &Sampler{r: r}, nil },
		NewSegmentLearner: func() (algo.SegmentLearner, error) { return &Learner{w: NewParams()}, nil },
	}
}

// Close has nothing to stop (learners with helper goroutines do).
func (l *Learner) Close() error { return nil }

// Model returns the learner's current policy as an algo.Model.
func (l *Learner) Model() algo.Model { return &Model{p: &Policy{w: l.w, n: l.n}} }

// Model is the fake algo.Model: greedy on the policy's logit.
type Model struct{ p *Policy }

// Act returns the greedy action.
func (m *Model) Act(dst, obs []float32) []float32 {
	var out [2]float32
	m.p.ForwardTo(out[:], obs, 1)
	dst[0] = 0
	if out[0] > 0 {
		dst[0] = 1
	}
	return dst
}

// Save writes the weights as safetensors.
func (m *Model) Save(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := nn.Save(f, m.p.w, nil); err != nil {
		f.Close()
		return fmt.Errorf("algotest: %w", err)
	}
	return f.Close()
}

// Config is the fake algorithm's config section: NumEnvs × NumSteps per
// segment (defaults 4 × 32).
type Config struct {
	NumEnvs  int `yaml:"num_envs"`
	NumSteps int `yaml:"num_steps"`
}

// Validate accepts any positive shape.
func (c *Config) Validate(algo.Header) error {
	if c.NumEnvs < 1 || c.NumSteps < 1 {
		return fmt.Errorf("%w: fake: num_envs %d and num_steps %d must be ≥ 1", algo.ErrConfig, c.NumEnvs, c.NumSteps)
	}
	return nil
}

// RolloutShape is what the on-policy executors read.
func (c *Config) RolloutShape() (numEnvs, T int, gamma float32) { return c.NumEnvs, c.NumSteps, 0.99 }

// Spec describes the fake algorithm ("fake") as algo/all describes real ones.
func Spec() algo.Spec {
	return algo.Spec{
		Name:      "fake",
		Can:       algo.CanSegmentLearner | algo.CanStatelessPolicy,
		NewConfig: func() algo.Config { return &Config{NumEnvs: 4, NumSteps: 32} },
		Scalars:   []string{"n"},
		Pieces: func(algo.Header, algo.Config, algo.Spaces) (*algo.Pieces, error) {
			return Pieces(), nil
		},
	}
}
