package nn

import (
	"errors"
	"fmt"
	"math/rand/v2"
)

// ConvNetConfig describes a convolutional network for image observations:
// an encoder of convolutions with ReLU after each, a flatten, then an MLP
// head (Hidden layers and Out outputs), as PyTorch's
//
//	nn.Sequential(Conv2d, ReLU, …, Conv2d, ReLU, Flatten, Linear, ReLU, …, Linear)
//
// whose parameter names ("0.weight", …) the network's parameters carry.
// MinAtar's DQN network is ConvPreset("minatar", C, 10, 10) with Hidden
// {128} and one output per action; Nature DQN's is ConvPreset("nature", 4,
// 84, 84) with Hidden {512}.
type ConvNetConfig struct {
	// Convs are the encoder's convolutions, each reading the previous
	// one's output (see ConvPreset). At least one.
	Convs []Conv2dConfig
	// Hidden, Out, Act, OutAct and Init configure the head as in MLPConfig;
	// its input is the flattened encoder output.
	Hidden      []int
	Out         int
	Act, OutAct Activation
	Init        Init
	// Gemm is the matrix-multiply backend of every layer; nil means
	// DefaultGemm().
	Gemm Gemm
}

// Validate reports every problem with the configuration.
func (c ConvNetConfig) Validate() error {
	var errs []error
	if len(c.Convs) == 0 {
		errs = append(errs, fmt.Errorf("%w: ConvNet needs at least one convolution", ErrConfig))
	}
	for i, cv := range c.Convs {
		if err := cv.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("conv %d: %w", i, err))
			continue
		}
		if i > 0 {
			p := c.Convs[i-1]
			if cv.InChannels != p.OutChannels || cv.InH != p.OutH() || cv.InW != p.OutW() {
				errs = append(errs, fmt.Errorf("%w: conv %d reads %d×%d×%d, conv %d writes %d×%d×%d", ErrConfig,
					i, cv.InChannels, cv.InH, cv.InW, i-1, p.OutChannels, p.OutH(), p.OutW()))
			}
		}
	}
	return errors.Join(errs...)
}

// ConvNet is a convolutional encoder followed by an MLP head, with the
// same calls as MLP: Forward, Backward, Params, ZeroGrad, Clone and
// CopyFrom, In and Out (per sample, NCHW input). Workspaces grow to the
// largest batch seen, then are reused. Not safe for concurrent use.
type ConvNet struct {
	convs  []*Conv2d
	head   *MLP
	params []*Param
	acts   [][]float32 // ReLU outputs of the convolutions
	grads  [][]float32 // dL/d(conv output), before the ReLU
}

// NewConvNet builds the network and initialises it from r: the
// convolutions with PyTorch's Conv2d default, the head as MLPConfig.Init
// says.
func NewConvNet(cfg ConvNetConfig, r *rand.Rand) (*ConvNet, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if r == nil {
		return nil, fmt.Errorf("%w: NewConvNet needs a *rand.Rand (see internal/rng)", ErrConfig)
	}
	n := &ConvNet{}
	for i, cc := range cfg.Convs {
		cv, err := NewConv2d(fmt.Sprintf("%d.", 2*i), cc, cfg.Gemm, r)
		if err != nil {
			return nil, err
		}
		n.convs = append(n.convs, cv)
		n.params = append(n.params, cv.Params()...)
	}
	last := n.convs[len(n.convs)-1]
	head, err := NewMLP(MLPConfig{In: last.Out(), Hidden: cfg.Hidden, Out: cfg.Out, Act: cfg.Act, OutAct: cfg.OutAct,
		Init: cfg.Init, Gemm: cfg.Gemm, FirstIndex: 2*len(n.convs) + 1}, r)
	if err != nil {
		return nil, err
	}
	n.head = head
	n.params = append(n.params, head.Params()...)
	n.acts = make([][]float32, len(n.convs))
	n.grads = make([][]float32, len(n.convs))
	return n, nil
}

// In is the number of input values per sample (C·H·W of the first
// convolution).
func (n *ConvNet) In() int { return n.convs[0].In() }

// Out is the number of outputs per sample.
func (n *ConvNet) Out() int { return n.head.Out() }

// Params returns every parameter, encoder first, in module order.
func (n *ConvNet) Params() []*Param { return n.params }

// ZeroGrad clears every gradient.
func (n *ConvNet) ZeroGrad() { ZeroGrads(n.params) }

// Forward runs the network on batch images x (NCHW) and returns the
// batch×Out output, valid until the next Forward.
func (n *ConvNet) Forward(x []float32, batch int) []float32 {
	in := x
	for i, cv := range n.convs {
		y := cv.Forward(in, batch)
		n.acts[i] = grow(n.acts[i], len(y))
		copy(n.acts[i], y)
		ReLU.applyInPlace(n.acts[i])
		in = n.acts[i]
	}
	return n.head.Forward(in, batch)
}

// Backward takes dL/d(output) for the last Forward, adds every
// parameter's gradient to its Grad and returns dL/dx (NCHW), valid until
// the next Backward.
func (n *ConvNet) Backward(dOut []float32) []float32 { return n.backward(dOut, true) }

// BackwardParams is Backward without dL/dx: it adds every parameter's
// gradient to its Grad and skips the first layer's input gradient, which
// a network reading observations does not need.
func (n *ConvNet) BackwardParams(dOut []float32) { n.backward(dOut, false) }

func (n *ConvNet) backward(dOut []float32, input bool) []float32 {
	d := n.head.Backward(dOut)
	for i := len(n.convs) - 1; i >= 0; i-- {
		n.grads[i] = grow(n.grads[i], len(d))
		ReLU.backward(n.grads[i], d, n.acts[i])
		d = n.convs[i].backward(n.grads[i], input || i > 0)
	}
	return d
}

// Clone returns an independent copy (weights and gradients copied, fresh
// workspaces, same backend).
func (n *ConvNet) Clone() *ConvNet {
	c := &ConvNet{head: n.head.Clone(), acts: make([][]float32, len(n.convs)), grads: make([][]float32, len(n.convs))}
	for _, cv := range n.convs {
		ps := CloneParams(cv.Params())
		nc := &Conv2d{cfg: cv.cfg, weight: ps[0], bias: ps[1], gemm: cv.gemm}
		c.convs = append(c.convs, nc)
		c.params = append(c.params, ps...)
	}
	c.params = append(c.params, c.head.Params()...)
	return c
}

// CopyFrom copies src's weights into n (a hard target update). The
// architectures must match.
func (n *ConvNet) CopyFrom(src *ConvNet) error { return HardUpdate(n.params, src.params) }
