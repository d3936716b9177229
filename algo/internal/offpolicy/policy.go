package offpolicy

import (
	"fmt"

	"herd/algo"
	"herd/nn"
	"herd/weights"
)

// Net is what MLPPolicy needs of its network: an *nn.MLP, or DQN's
// convolutional Q-network.
type Net interface {
	In() int
	Out() int
	Forward(x []float32, batch int) []float32
	Params() []*nn.Param
}

// MLPPolicy is the policy (algo.PolicyNet) of the off-policy algorithms:
// one network (Net) — DQN's Q-network (an MLP or a ConvNet), SAC's actor (raw tanh-Gaussian parameters),
// TD3's and DDPG's actor — optionally followed by a deterministic row-wise
// head (TD3 and DDPG: tanh·scale + bias, so outputs are actions μ(s)).
// Rows are independent of the batch (nn's GEMMs compute each row alone).
type MLPPolicy struct {
	Net Net
	// Head maps raw outputs to the policy's outputs, row by row (nil: the
	// raw outputs). It writes dst and returns it.
	Head    func(dst, out []float32) []float32
	version uint64
}

var _ algo.PolicyNet = (*MLPPolicy)(nil)

// OutDim is the width of one output row.
func (p *MLPPolicy) OutDim() int { return p.Net.Out() }

// Params are the network's parameters: the layout of the policy's weight
// versions (weights.Decode's like).
func (p *MLPPolicy) Params() []*nn.Param { return p.Net.Params() }

// SetWeights copies v into the network.
func (p *MLPPolicy) SetWeights(v *weights.Version) error {
	if err := v.CopyTo(p.Net.Params()); err != nil {
		return fmt.Errorf("offpolicy: policy: %w", err)
	}
	p.version = v.N
	return nil
}

// Version is the number of the weights in use.
func (p *MLPPolicy) Version() uint64 { return p.version }

// ForwardTo writes the outputs of n observations into dst[:n·OutDim()].
func (p *MLPPolicy) ForwardTo(dst, obs []float32, n int) []float32 {
	dst = dst[:n*p.Net.Out()]
	out := p.Net.Forward(obs[:n*p.Net.In()], n)
	if p.Head != nil {
		return p.Head(dst, out)
	}
	copy(dst, out)
	return dst
}
