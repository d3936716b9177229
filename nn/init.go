package nn

import (
	"fmt"
	"math"
	"math/rand/v2"

	"herd/nn/internal/kernel"
)

// InitKind selects how a Linear layer's weights are drawn.
type InitKind int

const (
	// InitTorchDefault reproduces PyTorch's nn.Linear default:
	// W, b ~ U(−1/√fan_in, 1/√fan_in) (kaiming_uniform with a = √5).
	// CleanRL's DQN, SAC, TD3 and DDPG networks use it.
	InitTorchDefault InitKind = iota
	// InitOrthogonal draws W orthogonal scaled by a gain (Saxe et al. 2014,
	// torch.nn.init.orthogonal_), bias 0. CleanRL's PPO uses gain √2 for
	// hidden layers, 0.01 for the policy output and 1 for the value output.
	InitOrthogonal
	// InitXavierUniform: W ~ U(−a, a), a = gain·√(6/(fan_in+fan_out))
	// (Glorot & Bengio 2010), bias 0.
	InitXavierUniform
	// InitKaimingUniform: W ~ U(−a, a), a = gain·√(3/fan_in) (He et al.
	// 2015; gain √2 for ReLU), bias 0.
	InitKaimingUniform
)

// Init configures weight initialisation for an MLP.
type Init struct {
	Kind InitKind
	// Gain for hidden layers. Zero means the default: √2 for orthogonal
	// and Kaiming, 1 for Xavier; unused by InitTorchDefault.
	Gain float64
	// OutGain for the output layer. Zero means 1. Unused by InitTorchDefault.
	OutGain float64
}

// OrthogonalInit fills w (rows×cols, row-major) with a random orthogonal
// matrix times gain: the Q factor of a standard-normal matrix, with signs
// fixed by R's diagonal so the draw is uniform (torch.nn.init.orthogonal_).
// If rows < cols the rows are orthonormal, else the columns.
func OrthogonalInit(w []float32, rows, cols int, gain float64, r *rand.Rand) {
	if len(w) != rows*cols {
		shapePanic("OrthogonalInit: len(w)=%d, want %d×%d", len(w), rows, cols)
	}
	// Work on a tall matrix (n ≥ m) and orthonormalise its m columns with
	// modified Gram–Schmidt in float64 (positive R diagonal = sign fix).
	n, m := rows, cols
	if rows < cols {
		n, m = cols, rows
	}
	a := make([]float64, n*m) // column-major: column j at a[j*n:]
	for i := range a {
		a[i] = r.NormFloat64()
	}
	for j := 0; j < m; j++ {
		cj := a[j*n : (j+1)*n]
		for q := 0; q < j; q++ {
			cq := a[q*n : (q+1)*n]
			var d float64
			for i := range cj {
				d += cq[i] * cj[i]
			}
			for i := range cj {
				cj[i] -= d * cq[i]
			}
		}
		var s float64
		for _, v := range cj {
			s += v * v
		}
		s = math.Sqrt(s)
		for i := range cj {
			cj[i] /= s
		}
	}
	// Element (i, j) of the tall matrix is a[j*n+i].
	for i := 0; i < rows; i++ {
		for j := 0; j < cols; j++ {
			var v float64
			if rows >= cols {
				v = a[j*n+i]
			} else {
				v = a[i*n+j]
			}
			w[i*cols+j] = float32(gain * v)
		}
	}
}

// UniformInit fills w with U(−bound, bound).
func UniformInit(w []float32, bound float64, r *rand.Rand) {
	for i := range w {
		w[i] = float32((2*r.Float64() - 1) * bound)
	}
}

// XavierUniformInit fills w with U(−a, a), a = gain·√(6/(fanIn+fanOut)).
func XavierUniformInit(w []float32, fanIn, fanOut int, gain float64, r *rand.Rand) {
	UniformInit(w, gain*math.Sqrt(6/float64(fanIn+fanOut)), r)
}

// KaimingUniformInit fills w with U(−a, a), a = gain·√(3/fanIn).
func KaimingUniformInit(w []float32, fanIn int, gain float64, r *rand.Rand) {
	UniformInit(w, gain*math.Sqrt(3/float64(fanIn)), r)
}

// initLinear initialises one layer. w is the [out, in] PyTorch-layout
// weight drawn first (so a draw matches the PyTorch layout element order)
// and then stored transposed into l.W.Value.
func initLinear(l *linear, in Init, out bool, r *rand.Rand) error {
	gain := in.Gain
	if out {
		gain = in.OutGain
		if gain == 0 {
			gain = 1
		}
	}
	tmp := make([]float32, l.in*l.out) // [out][in]
	switch in.Kind {
	case InitTorchDefault:
		bound := 1 / math.Sqrt(float64(l.in))
		UniformInit(tmp, bound, r)
		UniformInit(l.b.Value, bound, r)
	case InitOrthogonal:
		if gain == 0 {
			gain = math.Sqrt2
		}
		OrthogonalInit(tmp, l.out, l.in, gain, r)
		clear(l.b.Value)
	case InitXavierUniform:
		if gain == 0 {
			gain = 1
		}
		XavierUniformInit(tmp, l.in, l.out, gain, r)
		clear(l.b.Value)
	case InitKaimingUniform:
		if gain == 0 {
			gain = math.Sqrt2
		}
		KaimingUniformInit(tmp, l.in, gain, r)
		clear(l.b.Value)
	default:
		return fmt.Errorf("%w: unknown init kind %d", ErrConfig, in.Kind)
	}
	transposeTo(l.w.Value, tmp, l.out, l.in)
	return nil
}

// transposeTo writes the transpose of src (rows×cols) into dst (cols×rows).
func transposeTo(dst, src []float32, rows, cols int) { kernel.Transpose(dst, src, rows, cols) }
