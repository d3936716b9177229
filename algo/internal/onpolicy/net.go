package onpolicy

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"

	"herd/internal/scratch"
	"herd/nn"
)

// net is an MLP assembled from single-layer nn.MLPs (one Linear each, no
// activation) with the hidden activation applied here, between them.
//
// Why not one nn.MLP: the hidden tanh is tanhTo (see the package doc),
// whose bits every determinism fixture holds. Every GEMM, the weight layout, init, and safetensors naming still
// come from nn, so checkpoints are those of the equivalent nn.MLP /
// PyTorch nn.Sequential ("0.weight", "2.weight", "4.weight" …).
//
// Forward writes each hidden activation into the next layer's input buffer
// (nn.MLP.Input), where that layer reads it without a copy and Backward
// finds it; buffers grow to the largest batch and are then reused (no
// allocation in steady state).
type net struct {
	norm   *inputNorm // LayerNorm of the input, or nil
	layers []*nn.MLP
	act    nn.Activation
	hidden [][]float32 // post-activation output of each hidden layer: layer i+1's input
	dh     []float32   // gradient buffer for a hidden layer's output
	params []*nn.Param
	batch  int
}

// newNet builds in → hidden… → out. With ortho, weights are orthogonal with
// gain √2 for hidden layers and outGain for the output layer, biases 0
// (CleanRL's layer_init); otherwise PyTorch's nn.Linear default. Layers
// draw from r in order, input first.
func newNet(in int, hidden []int, out int, act nn.Activation, ortho bool, outGain float64, gemm nn.Gemm, r *rand.Rand) (*net, error) {
	switch act {
	case nn.Tanh, nn.ReLU, nn.Identity, nn.Sigmoid:
	default:
		return nil, fmt.Errorf("%w: activation %v", nn.ErrConfig, act)
	}
	n := &net{act: act}
	widths := append(append([]int{in}, hidden...), out)
	for l := 0; l+1 < len(widths); l++ {
		gain := math.Sqrt2
		if l+2 == len(widths) {
			gain = outGain
		}
		init := nn.Init{}
		if ortho {
			init = nn.Init{Kind: nn.InitOrthogonal, OutGain: gain}
		}
		m, err := nn.NewMLP(nn.MLPConfig{In: widths[l], Out: widths[l+1], OutAct: nn.Identity, Init: init, Gemm: gemm}, r)
		if err != nil {
			return nil, err
		}
		// Name as the l-th Linear of an nn.Sequential with activations
		// between: indices 0, 2, 4 …
		for _, p := range m.Params() {
			_, field, _ := cut(p.Name)
			p.Name = strconv.Itoa(2*l) + "." + field
			n.params = append(n.params, p)
		}
		n.layers = append(n.layers, m)
	}
	n.hidden = make([][]float32, len(hidden))
	return n, nil
}

// withInputNorm puts a LayerNorm of the input (learned scale 1 and shift
// 0 at the start, ε = 1e-5: PyTorch's nn.LayerNorm, MAPPO's
// feature_norm) before the first layer; its parameters come first, named
// "norm.weight" and "norm.bias".
func (n *net) withInputNorm(in int) *net {
	w, b := nn.NewParam("norm.weight", in), nn.NewParam("norm.bias", in)
	for i := range w.Value {
		w.Value[i] = 1
	}
	n.norm = &inputNorm{w: w, b: b}
	n.params = append([]*nn.Param{w, b}, n.params...)
	return n
}

// inputNorm is a LayerNorm over each row of the input:
//
//	x̂ = (x − mean(x)) / √(var(x) + 1e-5),  y = w ⊙ x̂ + b
//
// The input needs no gradient, so Backward computes only dw = Σ dy ⊙ x̂
// and db = Σ dy over the rows.
type inputNorm struct {
	w, b    *nn.Param
	xhat, y []float32
}

func (l *inputNorm) forward(x []float32, batch int) []float32 {
	in := len(l.w.Value)
	l.xhat, l.y = scratch.Resize(l.xhat, batch*in), scratch.Resize(l.y, batch*in)
	for r := range batch {
		row := x[r*in : (r+1)*in]
		var mean, v float64
		for _, e := range row {
			mean += float64(e)
		}
		mean /= float64(in)
		for _, e := range row {
			v += (float64(e) - mean) * (float64(e) - mean)
		}
		rstd := 1 / math.Sqrt(v/float64(in)+1e-5)
		for k, e := range row {
			xh := float32((float64(e) - mean) * rstd)
			l.xhat[r*in+k] = xh
			l.y[r*in+k] = l.w.Value[k]*xh + l.b.Value[k]
		}
	}
	return l.y
}

func (l *inputNorm) backward(dy []float32) {
	in := len(l.w.Value)
	for i, d := range dy {
		l.w.Grad[i%in] += d * l.xhat[i]
		l.b.Grad[i%in] += d
	}
}

func cut(name string) (string, string, bool) {
	for i := range len(name) {
		if name[i] == '.' {
			return name[:i], name[i+1:], true
		}
	}
	return name, "", false
}

// Params returns the parameters, layer by layer (weight, bias).
func (n *net) Params() []*nn.Param { return n.params }

// Reserve sizes every buffer for batches up to b.
func (n *net) Reserve(b int) {
	for _, l := range n.layers {
		l.Reserve(b)
	}
}

// Forward runs the network on batch rows of x and returns the output (the
// last layer's workspace, valid until the next Forward).
func (n *net) Forward(x []float32, batch int) []float32 {
	n.batch = batch
	if n.norm != nil {
		x = n.norm.forward(x, batch)
	}
	for i, l := range n.layers {
		y := l.Forward(x, batch)
		if i == len(n.layers)-1 {
			return y
		}
		h := n.layers[i+1].Input(batch)
		n.hidden[i] = h
		n.activate(h, y)
		x = h
	}
	panic("unreachable")
}

// ForwardTo runs Forward and copies the output into dst.
func (n *net) ForwardTo(dst, x []float32, batch int) []float32 {
	return dst[:copy(dst, n.Forward(x, batch))]
}

// Backward accumulates parameter gradients for dOut = dL/d(output) of the
// last Forward.
func (n *net) Backward(dOut []float32) {
	d := dOut
	for i := len(n.layers) - 1; i >= 0; i-- {
		if i == 0 && n.norm == nil {
			// Nothing reads the gradient with respect to the observations.
			n.layers[0].BackwardSplit(d, nil, false)
			return
		}
		dx := n.layers[i].Backward(d)
		if i == 0 {
			if n.norm != nil {
				n.norm.backward(dx)
			}
			return
		}
		h := n.hidden[i-1]
		n.dh = scratch.Resize(n.dh, len(h))
		n.activateBackward(n.dh, dx, h)
		d = n.dh
	}
}

func (n *net) activate(dst, x []float32) {
	switch n.act {
	case nn.Tanh:
		tanhTo(dst, x)
	case nn.ReLU:
		for i, v := range x {
			dst[i] = max(v, 0)
		}
	case nn.Sigmoid:
		for i, v := range x {
			dst[i] = float32(1 / (1 + math.Exp(-float64(v))))
		}
	default:
		copy(dst, x)
	}
}

// activateBackward writes dx = dy ⊙ act'(·), from the activation's output y.
func (n *net) activateBackward(dx, dy, y []float32) {
	switch n.act {
	case nn.Tanh:
		tanhBackward(dx, dy, y)
	case nn.ReLU:
		for i, v := range y {
			if v > 0 {
				dx[i] = dy[i]
			} else {
				dx[i] = 0
			}
		}
	case nn.Sigmoid:
		for i, v := range y {
			dx[i] = dy[i] * v * (1 - v)
		}
	default:
		copy(dx, dy)
	}
}
