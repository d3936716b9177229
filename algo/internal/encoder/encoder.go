package encoder

import (
	"fmt"
	"math/rand/v2"

	"herd/env"
	"herd/nn"
)

// The values of the configs' encoder key.
const (
	MLP     = "mlp"
	MinAtar = "minatar"
	Nature  = "nature"
	Impala  = "impala"
)

// Check reports an unknown encoder name.
func Check(name string) error {
	switch name {
	case MLP, MinAtar, Nature, Impala:
		return nil
	}
	return fmt.Errorf("encoder must be %s, %s, %s or %s, got %q", MLP, MinAtar, Nature, Impala, name)
}

// IsConv reports whether the encoder reads images.
func IsConv(name string) bool { return name == MinAtar || name == Nature || name == Impala }

// CheckEnv reports why env id's observations cannot feed encoder name (a
// convolutional encoder on observations that are not images), or nil. An
// env that cannot be made is the caller's error to report, so it gives nil.
func CheckEnv(mk env.Maker, name, id string) error {
	if !IsConv(name) || id == "" {
		return nil
	}
	e, err := mk.Make(id, env.WithAgentActionSpaces())
	if err != nil {
		return nil
	}
	defer e.Close()
	return CheckEnvSpace(name, id, e)
}

// CheckEnvSpace is CheckSpace for env e (of id), made already: it also
// names a Dict observation space, which Make flattens to a vector for MLP
// policies and no convolutional encoder can read.
func CheckEnvSpace(name, id string, e env.Env) error {
	if d, ok := env.DictSpaceOf(e); ok && IsConv(name) {
		return fmt.Errorf("encoder %s on env %s: observations are a Dict space, %v, flattened to a vector for MLP policies; a convolutional encoder needs an image (a Box of shape [height, width, channels]): use encoder mlp",
			name, id, d)
	}
	return CheckSpace(name, id, e.ObservationSpace())
}

// CheckSpace reports why observations obs of env id cannot feed encoder
// name, or nil: CheckEnv for a caller that has made the env already.
func CheckSpace(name, id string, obs env.Space) error {
	if !IsConv(name) {
		return nil
	}
	if _, _, _, err := ImageDims(obs); err != nil {
		return fmt.Errorf("encoder %s on env %s: %w", name, id, err)
	}
	return nil
}

// ImageDims reads height, width and channels from an image observation
// space: a Box of shape [H, W, C].
func ImageDims(obs env.Space) (h, w, c int, err error) {
	b, ok := obs.(env.Box)
	if !ok || len(b.Dims) != 3 || b.Dims[0] < 1 || b.Dims[1] < 1 || b.Dims[2] < 1 {
		what := fmt.Sprint(obs)
		if ok {
			what = fmt.Sprintf("a Box of shape %v", b.Shape())
		}
		return 0, 0, 0, fmt.Errorf("observations (%s) are not an image (a Box of shape [height, width, channels]), which a convolutional encoder needs", what)
	}
	return b.Dims[0], b.Dims[1], b.Dims[2], nil
}

// Conv is a convolutional network on image observations: the preset's
// convolutions, then ReLU hidden layers and a linear output, initialised as
// PyTorch's nn.Conv2d and nn.Linear. Envs write images row-major height ×
// width × channels (MinAtar's state(), Gymnasium's Atari frames) and
// nn.Conv2d reads channels × height × width, so Forward transposes each
// observation here — the one place observations enter the network — and
// replay, the wire and every executor keep the env's layout.
type Conv struct {
	net     *nn.ConvNet
	h, w, c int
	chw     []float32
}

// NewConv builds the preset's network for obs with the given hidden
// widths and outputs, drawing weights from r.
func NewConv(preset string, obs env.Space, hidden []int, out int, r *rand.Rand) (*Conv, error) {
	return newConv(preset, obs, hidden, out, nn.Identity, r)
}

// NewTrunk builds the preset's convolutions and hidden ReLU layers, the
// last of them activated too, as the encoder two heads share (CleanRL's
// Atari Agent.network: convolutions, Flatten, Linear(·, 512), ReLU). Out
// is the last hidden width; hidden must not be empty.
func NewTrunk(preset string, obs env.Space, hidden []int, r *rand.Rand) (*Conv, error) {
	if len(hidden) == 0 {
		return nil, fmt.Errorf("%w: a shared encoder needs at least one hidden layer (its output)", nn.ErrConfig)
	}
	return newConv(preset, obs, hidden[:len(hidden)-1], hidden[len(hidden)-1], nn.ReLU, r)
}

func newConv(preset string, obs env.Space, hidden []int, out int, outAct nn.Activation, r *rand.Rand) (*Conv, error) {
	h, w, c, err := ImageDims(obs)
	if err != nil {
		return nil, err
	}
	cfg := nn.ConvNetConfig{Hidden: hidden, Out: out, Act: nn.ReLU, OutAct: outAct}
	if preset == Impala {
		cfg.Stages, err = nn.ImpalaStages(c, h, w)
	} else {
		cfg.Convs, err = nn.ConvPreset(preset, c, h, w)
	}
	if err != nil {
		return nil, err
	}
	n, err := nn.NewConvNet(cfg, r)
	if err != nil {
		return nil, err
	}
	return &Conv{net: n, h: h, w: w, c: c}, nil
}

// Forward transposes the batch of HWC observations to CHW and runs the
// network on it. The result is the network's workspace, valid until the
// next Forward.
func (q *Conv) Forward(obs []float32, batch int) []float32 {
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

// ForwardTo is Forward copied into dst (grown as needed).
func (q *Conv) ForwardTo(dst, obs []float32, batch int) []float32 {
	y := q.Forward(obs, batch)
	if cap(dst) < len(y) {
		dst = make([]float32, len(y))
	}
	dst = dst[:len(y)]
	copy(dst, y)
	return dst
}

// Backward adds dL/dθ for the last Forward's outputs to the parameters'
// gradients; the observation's own gradient is not computed.
func (q *Conv) Backward(dOut []float32) { q.net.BackwardParams(dOut) }

// In is the number of observation values per sample.
func (q *Conv) In() int { return q.h * q.w * q.c }

// Out is the number of outputs per sample.
func (q *Conv) Out() int { return q.net.Out() }

// Params are the network's parameters in PyTorch's module order.
func (q *Conv) Params() []*nn.Param { return q.net.Params() }

// ZeroGrad zeroes every parameter gradient.
func (q *Conv) ZeroGrad() { q.net.ZeroGrad() }

// Reserve is a no-op: the network's workspaces grow on first use.
func (q *Conv) Reserve(int) {}

// Clone returns an independent copy with the same weights.
func (q *Conv) Clone() *Conv { return &Conv{net: q.net.Clone(), h: q.h, w: q.w, c: q.c} }
