package nn

import "fmt"

// Tensor is a dense float32 array: a flat row-major Data slice plus its
// Shape. len(Data) is always the product of Shape.
type Tensor struct {
	Shape []int
	Data  []float32
}

// NewTensor allocates a zeroed tensor of the given shape.
func NewTensor(shape ...int) Tensor {
	return Tensor{Shape: append([]int(nil), shape...), Data: make([]float32, numel(shape))}
}

// Param is one trainable array: its value, the gradient accumulated by
// Backward, and the name and shape under which checkpoints store it.
//
// Value and Grad always have the same length. Gradients accumulate (+=)
// across Backward calls until ZeroGrad, as in PyTorch.
type Param struct {
	// Name is the checkpoint key, e.g. "0.weight" (PyTorch nn.Sequential
	// naming, so a Sequential of Linear and activation modules loads it).
	Name string
	// Shape is the logical (checkpoint) shape, e.g. [out, in] for a weight.
	Shape []int
	// Transposed reports that Value holds the row-major transpose of a
	// 2-D Shape: for a Linear weight Shape is [out, in] as in PyTorch but
	// Value is laid out [in][out], which makes the forward pass a plain
	// X·W product. Save and Load transpose on the way out and in.
	Transposed bool
	Value      []float32
	Grad       []float32
}

// NewParam allocates a zeroed parameter.
func NewParam(name string, shape ...int) *Param {
	n := numel(shape)
	return &Param{Name: name, Shape: append([]int(nil), shape...), Value: make([]float32, n), Grad: make([]float32, n)}
}

// ZeroGrad sets the gradient to zero.
func (p *Param) ZeroGrad() { clear(p.Grad) }

// ZeroGrads zeroes the gradients of every parameter in ps.
func ZeroGrads(ps []*Param) {
	for _, p := range ps {
		clear(p.Grad)
	}
}

// CloneParams deep-copies a parameter list (values and gradients).
func CloneParams(ps []*Param) []*Param {
	out := make([]*Param, len(ps))
	for i, p := range ps {
		q := *p
		q.Shape = append([]int(nil), p.Shape...)
		q.Value = append([]float32(nil), p.Value...)
		q.Grad = append([]float32(nil), p.Grad...)
		out[i] = &q
	}
	return out
}

// NumParams returns the total number of scalars in ps.
func NumParams(ps []*Param) int {
	n := 0
	for _, p := range ps {
		n += len(p.Value)
	}
	return n
}

func numel(shape []int) int {
	n := 1
	for _, s := range shape {
		n *= s
	}
	return n
}

func checkLists(op string, dst, src []*Param) error {
	if len(dst) != len(src) {
		return fmt.Errorf("%w: %s: %d params vs %d", ErrShape, op, len(dst), len(src))
	}
	for i := range dst {
		if len(dst[i].Value) != len(src[i].Value) {
			return fmt.Errorf("%w: %s: param %d (%s) has %d values vs %d (%s)", ErrShape, op, i,
				dst[i].Name, len(dst[i].Value), len(src[i].Value), src[i].Name)
		}
	}
	return nil
}

// shapePanic reports a programming error in hot-path math.
func shapePanic(format string, args ...any) {
	panic(fmt.Errorf("%w: "+format, append([]any{ErrShape}, args...)...))
}
