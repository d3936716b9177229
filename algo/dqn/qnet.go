package dqn

import (
	"fmt"
	"math/rand/v2"

	"herd/algo"
	"herd/env"
	"herd/nn"
)

// Encoders are the values of the config's encoder key.
const (
	EncoderMLP     = "mlp"
	EncoderMinAtar = "minatar"
	EncoderNature  = "nature"
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

func (m mlpQ) backward(d []float32, s nn.Splitter) { m.BackwardSplit(d, s, false) }
func (m mlpQ) clone() qNet                         { return mlpQ{m.Clone()} }

// convQ is the convolutional Q-network (encoder: minatar or nature). Envs
// write images row-major height × width × channels (MinAtar's state(),
// Gymnasium's Atari frames) and nn.Conv2d reads channels × height ×
// width, so Forward transposes each observation here — the one place
// observations enter the network — and replay, the wire and every
// executor keep the env's layout.
type convQ struct {
	net     *nn.ConvNet
	h, w, c int
	chw     []float32
}

// Forward transposes the batch of HWC observations to CHW and runs the
// network on it.
func (q *convQ) Forward(obs []float32, batch int) []float32 {
	n := q.h * q.w * q.c
	if cap(q.chw) < batch*n {
		q.chw = make([]float32, batch*n)
	}
	x := q.chw[:batch*n]
	hw := q.h * q.w
	for b := range batch {
		src, dst := obs[b*n:(b+1)*n], x[b*n:(b+1)*n]
		for p := range hw {
			for ch := range q.c {
				dst[ch*hw+p] = src[p*q.c+ch]
			}
		}
	}
	return q.net.Forward(x, batch)
}

func (q *convQ) In() int                             { return q.h * q.w * q.c }
func (q *convQ) Out() int                            { return q.net.Out() }
func (q *convQ) Params() []*nn.Param                 { return q.net.Params() }
func (q *convQ) ZeroGrad()                           { q.net.ZeroGrad() }
func (q *convQ) backward(d []float32, _ nn.Splitter) { q.net.BackwardParams(d) }
func (q *convQ) clone() qNet                         { return &convQ{net: q.net.Clone(), h: q.h, w: q.w, c: q.c} }

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
		h, w, c, err := imageDims(obs)
		if err != nil {
			return nil, err
		}
		convs, err := nn.ConvPreset(cfg.Encoder, c, h, w)
		if err != nil {
			return nil, fmt.Errorf("%w: dqn: %w", algo.ErrConfig, err)
		}
		n, err := nn.NewConvNet(nn.ConvNetConfig{Convs: convs, Hidden: cfg.NetArch, Out: nActions, Act: nn.ReLU}, r)
		if err != nil {
			return nil, err
		}
		return &convQ{net: n, h: h, w: w, c: c}, nil
	}
	return nil, fmt.Errorf("%w: dqn: encoder must be %s, %s or %s, got %q", algo.ErrConfig,
		EncoderMLP, EncoderMinAtar, EncoderNature, cfg.Encoder)
}

// imageDims reads height, width and channels from an image observation
// space: a Box of shape [H, W, C].
func imageDims(obs env.Space) (h, w, c int, err error) {
	b, ok := obs.(env.Box)
	if !ok || len(b.Dims) != 3 || b.Dims[0] < 1 || b.Dims[1] < 1 || b.Dims[2] < 1 {
		return 0, 0, 0, fmt.Errorf("%w: dqn: a convolutional encoder needs image observations, a Box of shape [height, width, channels]; got %v", algo.ErrConfig, obs)
	}
	return b.Dims[0], b.Dims[1], b.Dims[2], nil
}

// newOptimizer returns the optimizer the config names.
func (c *Config) newOptimizer() (nn.Optimizer, error) {
	if c.Optimizer == "rmsprop" {
		return nn.NewRMSProp(nn.RMSPropConfig{LR: float32(c.LearningRate), Alpha: float32(c.RMSPropAlpha),
			Eps: float32(c.RMSPropEps), Centered: c.RMSPropCentered})
	}
	return nn.NewAdam(nn.AdamConfig{LR: float32(c.LearningRate)})
}
