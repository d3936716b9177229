package onpolicy

import (
	"context"
	"fmt"

	"herd/algo"
	"herd/algo/internal/encoder"
	"herd/internal/rng"
	"herd/nn"
)

// Common holds the settings PPO and A2C share, for Check.
type Common struct {
	NumEnvs, NumSteps         int
	LearningRate, MaxGradNorm float32
	Gamma, GAELambda          float32
	EntCoef, VFCoef           float32
	Hidden                    []int
	Activation                string
	Encoder                   string
	SharedEncoder             bool
	// Recurrent: the networks have a recurrent core, which may read the
	// observation itself (Hidden empty).
	Recurrent bool
}

// Check reports each problem with the shared settings through bad (the
// algorithm's Validate collector, which adds ErrConfig and its name),
// including a run too short for one rollout of NumEnvs × NumSteps.
func (c Common) Check(bad func(format string, a ...any), h algo.Header) {
	if c.NumEnvs < 1 {
		bad("num_envs must be >= 1, got %d", c.NumEnvs)
	}
	if c.NumSteps < 1 {
		bad("num_steps must be >= 1, got %d", c.NumSteps)
	}
	if !(c.LearningRate > 0) {
		bad("learning_rate must be > 0, got %v", c.LearningRate)
	}
	if c.MaxGradNorm < 0 {
		bad("max_grad_norm must be >= 0, got %v", c.MaxGradNorm)
	}
	if !(c.Gamma > 0 && c.Gamma <= 1) {
		bad("gamma must be in (0, 1], got %v", c.Gamma)
	}
	if !(c.GAELambda >= 0 && c.GAELambda <= 1) {
		bad("gae_lambda must be in [0, 1], got %v", c.GAELambda)
	}
	if c.EntCoef < 0 || c.VFCoef < 0 {
		bad("ent_coef and vf_coef must be >= 0, got %v and %v", c.EntCoef, c.VFCoef)
	}
	if len(c.Hidden) == 0 && !c.Recurrent {
		bad("hidden must list at least one width")
	}
	for _, w := range c.Hidden {
		if w < 1 {
			bad("hidden widths must be >= 1, got %v", c.Hidden)
			break
		}
	}
	if _, err := nn.ParseActivation(c.Activation); err != nil {
		bad("activation %q: want tanh, relu, sigmoid or identity", c.Activation)
	}
	if err := encoder.Check(c.Encoder); err != nil {
		bad("%v", err)
	} else if err := encoder.CheckEnv(h.Envs, c.Encoder, h.Env); err != nil {
		bad("%v", err)
	}
	if c.SharedEncoder && !encoder.IsConv(c.Encoder) {
		bad("shared_encoder needs a convolutional encoder (minatar, nature or impala), got %q", c.Encoder)
	}
	if batch := int64(c.NumEnvs) * int64(c.NumSteps); batch > 0 && h.Steps < batch {
		bad("steps (%d) must be at least one rollout, num_envs × num_steps = %d", h.Steps, batch)
	}
}

// LoadPolicy rebuilds the deterministic policy of algorithm name from a
// checkpoint: c must be a *C, agentConfig maps it to the network shape, and
// the init stream is (h.Seed, name+"/init", 0) as in Train.
func LoadPolicy[C any](name, path string, h algo.Header, c algo.Config, agentConfig func(*C) AgentConfig) (algo.Policy, error) {
	cfg, ok := any(c).(*C)
	if !ok {
		return nil, fmt.Errorf("%w: %s: config is %T, want *%s.Config", algo.ErrConfig, name, c, name)
	}
	agent, err := LoadAgent(path, h.Envs, h.Env, agentConfig(cfg), rng.New(h.Seed, name+"/init", 0))
	if err != nil {
		return nil, err // a nil *Agent must not become a non-nil algo.Policy
	}
	return agent, nil
}

// TrainFunc adapts an algorithm's typed Train to algo.Spec.Train: it checks
// that the config is a *C and never turns a nil *Agent into a non-nil
// algo.Model.
func TrainFunc[C any](name string, train func(context.Context, *algo.Runtime, *C) (*Agent, error)) func(context.Context, *algo.Runtime, algo.Config) (algo.Model, error) {
	return func(ctx context.Context, rt *algo.Runtime, c algo.Config) (algo.Model, error) {
		cfg, ok := any(c).(*C)
		if !ok || cfg == nil {
			return nil, fmt.Errorf("%w: %s: config is %T, want *%s.Config", algo.ErrConfig, name, c, name)
		}
		agent, err := train(ctx, rt, cfg)
		if agent == nil {
			return nil, err
		}
		return agent, err
	}
}

// PiecesFunc adapts an algorithm's typed Pieces to algo.Spec.Pieces: it
// checks that the config is a *C.
func PiecesFunc[C any](name string, pieces func(algo.Header, *C, algo.Spaces) (*algo.Pieces, error)) func(algo.Header, algo.Config, algo.Spaces) (*algo.Pieces, error) {
	return func(h algo.Header, c algo.Config, sp algo.Spaces) (*algo.Pieces, error) {
		cfg, ok := any(c).(*C)
		if !ok || cfg == nil {
			return nil, fmt.Errorf("%w: %s: config is %T, want *%s.Config", algo.ErrConfig, name, c, name)
		}
		return pieces(h, cfg, sp)
	}
}
