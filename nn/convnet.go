package nn

import (
	"errors"
	"fmt"
	"math/rand/v2"

	"herd/internal/scratch"
	"herd/nn/internal/kernel"
)

// ConvNetConfig describes a convolutional network for image observations:
// an encoder, a flatten, then an MLP head (Hidden layers and Out outputs).
// The encoder is either Convs, convolutions with ReLU after each, as
// PyTorch's
//
//	nn.Sequential(Conv2d, ReLU, …, Conv2d, ReLU, Flatten, Linear, ReLU, …, Linear)
//
// or Stages, IMPALA's residual stages followed by a ReLU, as
//
//	nn.Sequential(ConvSequence, …, ConvSequence, Flatten, ReLU, Linear, ReLU, …, Linear)
//
// whose parameter names ("0.weight", "0.res_block1.conv0.weight", …) the
// network's parameters carry. MinAtar's DQN network is ConvPreset("minatar",
// C, 10, 10) with Hidden {128} and one output per action; Nature DQN's is
// ConvPreset("nature", 4, 84, 84) with Hidden {512}; IMPALA's is
// ImpalaStages(C, H, W) with Hidden {256}.
type ConvNetConfig struct {
	// Convs are the encoder's convolutions, each reading the previous
	// one's output (see ConvPreset). Exactly one of Convs and Stages is set.
	Convs []Conv2dConfig
	// Stages are residual stages, each reading the previous one's output
	// (see ImpalaStages).
	Stages []ResidualStage
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
	if (len(c.Convs) == 0) == (len(c.Stages) == 0) {
		errs = append(errs, fmt.Errorf("%w: ConvNet needs convolutions or residual stages, one of the two (convs %d, stages %d)", ErrConfig, len(c.Convs), len(c.Stages)))
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
	for i, st := range c.Stages {
		if err := st.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("stage %d: %w", i, err))
			continue
		}
		if i > 0 {
			p := c.Stages[i-1]
			if st.InChannels != p.Channels || st.InH != p.OutH() || st.InW != p.OutW() {
				errs = append(errs, fmt.Errorf("%w: stage %d reads %d×%d×%d, stage %d writes %d×%d×%d", ErrConfig,
					i, st.InChannels, st.InH, st.InW, i-1, p.Channels, p.OutH(), p.OutW()))
			}
		}
	}
	return errors.Join(errs...)
}

// encLayer is one layer of a ConvNet's encoder: a convolution, a ReLU or
// a residual stage, each holding the workspaces of its last Forward.
type encLayer interface {
	in() int
	out() int
	params() []*Param
	forward(x []float32, batch int) []float32
	// backward returns dL/dx only when input is set.
	backward(dy []float32, input bool) []float32
	// clone is the layer with parameters ps (copies of params()) and fresh
	// workspaces.
	clone(ps []*Param) encLayer
}

// ConvNet is a convolutional encoder followed by an MLP head, with the
// same calls as MLP: Forward, Backward, Params, ZeroGrad, Clone and
// CopyFrom, In and Out (per sample, NCHW input). Workspaces grow to the
// largest batch seen, then are reused. Not safe for concurrent use.
type ConvNet struct {
	layers []encLayer
	head   *MLP
	params []*Param
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
	var first int // the module index of the head's first Linear
	for i, cc := range cfg.Convs {
		cv, err := NewConv2d(fmt.Sprintf("%d.", 2*i), cc, cfg.Gemm, r)
		if err != nil {
			return nil, err
		}
		n.layers = append(n.layers, &convLayer{Conv2d: cv, relu: true})
		first = 2*i + 3 // after the ReLU and the Flatten
	}
	for i, sc := range cfg.Stages {
		st, err := newStageLayer(fmt.Sprintf("%d.", i), sc, cfg.Gemm, r)
		if err != nil {
			return nil, err
		}
		n.layers = append(n.layers, st)
		first = i + 3 // after the Flatten and the ReLU
	}
	if len(cfg.Stages) > 0 {
		n.layers = append(n.layers, &reluLayer{size: n.layers[len(n.layers)-1].out()})
	}
	for _, l := range n.layers {
		n.params = append(n.params, l.params()...)
	}
	head, err := NewMLP(MLPConfig{In: n.layers[len(n.layers)-1].out(), Hidden: cfg.Hidden, Out: cfg.Out, Act: cfg.Act, OutAct: cfg.OutAct,
		Init: cfg.Init, Gemm: cfg.Gemm, FirstIndex: first}, r)
	if err != nil {
		return nil, err
	}
	n.head = head
	n.params = append(n.params, head.Params()...)
	return n, nil
}

// In is the number of input values per sample (C·H·W of the first
// layer).
func (n *ConvNet) In() int { return n.layers[0].in() }

// Out is the number of outputs per sample.
func (n *ConvNet) Out() int { return n.head.Out() }

// Params returns every parameter, encoder first, in module order.
func (n *ConvNet) Params() []*Param { return n.params }

// ZeroGrad clears every gradient.
func (n *ConvNet) ZeroGrad() { ZeroGrads(n.params) }

// Forward runs the network on batch images x (NCHW) and returns the
// batch×Out output, valid until the next Forward.
func (n *ConvNet) Forward(x []float32, batch int) []float32 {
	if len(x) != batch*n.In() {
		shapePanic("nn: ConvNet.Forward: len(x) = %d, want batch %d × %d", len(x), batch, n.In())
	}
	for _, l := range n.layers {
		x = l.forward(x, batch)
	}
	return n.head.Forward(x, batch)
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
	for i := len(n.layers) - 1; i >= 0; i-- {
		d = n.layers[i].backward(d, input || i > 0)
	}
	return d
}

// Clone returns an independent copy (weights and gradients copied, fresh
// workspaces, same backend).
func (n *ConvNet) Clone() *ConvNet {
	c := &ConvNet{head: n.head.Clone()}
	for _, l := range n.layers {
		ps := CloneParams(l.params())
		c.layers = append(c.layers, l.clone(ps))
		c.params = append(c.params, ps...)
	}
	c.params = append(c.params, c.head.Params()...)
	return c
}

// CopyFrom copies src's weights into n (a hard target update). The
// architectures must match.
func (n *ConvNet) CopyFrom(src *ConvNet) error { return HardUpdate(n.params, src.params) }

// convLayer is a Conv2d as an encoder layer, with relu the ReLU after
// it too, applied as the bias is added (one pass over the output).
type convLayer struct {
	*Conv2d
	relu bool
	d    []float32 // dL/d(pre-activation), with relu
}

func (c *convLayer) in() int          { return c.In() }
func (c *convLayer) out() int         { return c.Out() }
func (c *convLayer) params() []*Param { return c.Params() }
func (c *convLayer) forward(x []float32, batch int) []float32 {
	return c.Conv2d.forward(x, batch, c.relu)
}
func (c *convLayer) backward(dy []float32, input bool) []float32 {
	if c.relu {
		c.d = scratch.Resize(c.d, len(dy))
		ReLU.backward(c.d, dy, c.y)
		dy = c.d
	}
	return c.Conv2d.backward(dy, input)
}
func (c *convLayer) clone(ps []*Param) encLayer {
	return &convLayer{Conv2d: c.withParams(ps[0], ps[1]), relu: c.relu}
}

// reluLayer is an elementwise ReLU over size values per sample.
type reluLayer struct {
	size int
	y, d []float32
}

func (r *reluLayer) in() int          { return r.size }
func (r *reluLayer) out() int         { return r.size }
func (r *reluLayer) params() []*Param { return nil }
func (r *reluLayer) forward(x []float32, _ int) []float32 {
	r.y = scratch.Resize(r.y, len(x))
	copy(r.y, x)
	kernel.AddBias(true, r.y, 0, true) // max(x + 0, 0) = max(x, 0), also for −0 and NaN
	return r.y
}
func (r *reluLayer) backward(dy []float32, _ bool) []float32 {
	r.d = scratch.Resize(r.d, len(dy))
	ReLU.backward(r.d, dy, r.y)
	return r.d
}
func (r *reluLayer) clone([]*Param) encLayer { return &reluLayer{size: r.size} }
