package dqn

import (
	"fmt"
	"math/rand/v2"

	"herd/algo"
	"herd/algo/internal/encoder"
	"herd/env"
	"herd/nn"
)

// Encoders are the values of the config's encoder key.
const (
	EncoderMLP     = encoder.MLP
	EncoderMinAtar = encoder.MinAtar
	EncoderNature  = encoder.Nature
	EncoderImpala  = encoder.Impala
)

// qNet is what DQN's code needs of a Q-network: the MLP of vector
// observations and the ConvNet of image observations both fit it.
type qNet interface {
	In() int  // observation values per sample, as the env writes them
	Out() int // one Q-value per action
	Forward(obs []float32, batch int) []float32
	Params() []*nn.Param
	ZeroGrad()
	// backward adds dL/dθ for the last Forward's outputs to the
	// gradients; s may run part of it beside the caller.
	backward(dOut []float32, s nn.Splitter)
	clone() qNet
}

// mlpQ is the MLP Q-network (encoder: mlp).
type mlpQ struct{ *nn.MLP }

func (m mlpQ) backward(d []float32, s nn.Splitter) { m.BackwardSplit(d, s, false) } // no dL/d(obs)
func (m mlpQ) clone() qNet                         { return mlpQ{m.Clone()} }

// convQ is the convolutional Q-network (encoder: minatar, nature or impala).
type convQ struct{ *encoder.Conv }

func (q convQ) backward(d []float32, _ nn.Splitter) { q.Backward(d) }
func (q convQ) clone() qNet                         { return convQ{q.Clone()} }

// newQNet builds the Q-network the config's encoder names for obs,
// initialised as PyTorch's nn.Linear and nn.Conv2d.
func newQNet(cfg *Config, obs env.Space, nActions int, r *rand.Rand) (qNet, error) {
	switch cfg.Encoder {
	case "", EncoderMLP:
		m, err := nn.NewMLP(nn.MLPConfig{In: obs.Dim(), Hidden: cfg.NetArch, Out: nActions, Act: nn.ReLU}, r)
		if err != nil {
			return nil, err
		}
		return mlpQ{m}, nil
	case EncoderMinAtar, EncoderNature:
		n, err := encoder.NewConv(cfg.Encoder, obs, cfg.NetArch, nActions, r)
		if err != nil {
			return nil, fmt.Errorf("%w: dqn: %w", algo.ErrConfig, err)
		}
		return convQ{n}, nil
	}
	return nil, fmt.Errorf("%w: dqn: %w", algo.ErrConfig, encoder.Check(cfg.Encoder))
}

// newOptimizer returns the optimizer the config names.
func (c *Config) newOptimizer() (nn.Optimizer, error) {
	if c.Optimizer == "rmsprop" {
		return nn.NewRMSProp(nn.RMSPropConfig{LR: float32(c.LearningRate), Alpha: float32(c.RMSPropAlpha),
			Eps: float32(c.RMSPropEps), Centered: c.RMSPropCentered})
	}
	return nn.NewAdam(nn.AdamConfig{LR: float32(c.LearningRate)})
}
