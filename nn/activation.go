package nn

import (
	"fmt"
	"math"

	"herd/nn/internal/kernel"
)

// Activation is an element-wise nonlinearity. Every activation here has a
// derivative that can be computed from its output y alone, so a layer keeps
// only its post-activation output for the backward pass.
type Activation int

const (
	// ActDefault is the zero value: ReLU for hidden layers, Identity for
	// the output layer.
	ActDefault Activation = iota
	// Identity: y = x.
	Identity
	// ReLU: y = max(x, 0). Fused into the GEMM kernel on the native backend.
	ReLU
	// Tanh: y = tanh(x), y' = 1 − y².
	Tanh
	// Sigmoid: y = 1/(1+e^−x), y' = y(1 − y).
	Sigmoid
)

func (a Activation) String() string {
	switch a {
	case ActDefault:
		return "default"
	case Identity:
		return "identity"
	case ReLU:
		return "relu"
	case Tanh:
		return "tanh"
	case Sigmoid:
		return "sigmoid"
	}
	return fmt.Sprintf("Activation(%d)", int(a))
}

// ParseActivation maps "relu", "tanh", "sigmoid", "identity" to an Activation.
func ParseActivation(s string) (Activation, error) {
	switch s {
	case "relu":
		return ReLU, nil
	case "tanh":
		return Tanh, nil
	case "sigmoid":
		return Sigmoid, nil
	case "identity", "linear", "none":
		return Identity, nil
	}
	return 0, fmt.Errorf("%w: unknown activation %q", ErrConfig, s)
}

func (a Activation) valid() bool { return a >= ActDefault && a <= Sigmoid }

// applyInPlace applies a to x (ReLU is normally fused; this is the fallback).
func (a Activation) applyInPlace(x []float32) {
	switch a {
	case ReLU:
		for i, v := range x {
			x[i] = max(v, 0)
		}
	case Tanh:
		kernel.Tanh(true, x, x)
	case Sigmoid:
		for i, v := range x {
			x[i] = float32(1 / (1 + math.Exp(-float64(v))))
		}
	}
}

// backward writes dx = dy ⊙ a'(·), with a' computed from the output y.
func (a Activation) backward(dx, dy, y []float32) {
	dx = dx[:len(dy)]
	y = y[:len(dy)]
	switch a {
	case ReLU:
		// Signs are random, so a branch mispredicts half the time; the
		// kernel uses a compare-and-mask instead.
		kernel.ReluBackward(true, dx, dy, y)
	case Tanh:
		kernel.TanhBackward(true, dx, dy, y)
	case Sigmoid:
		for i, g := range dy {
			dx[i] = g * y[i] * (1 - y[i])
		}
	default:
		copy(dx, dy)
	}
}

// tanh32 is tanh in float32 via float64 math.Tanh (exact to float32
// rounding; a vectorised approximation is a possible later speed-up).
func tanh32(x float32) float32 { return float32(math.Tanh(float64(x))) }
