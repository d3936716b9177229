package nn

import (
	"errors"
	"fmt"
	"math"

	"herd/nn/internal/kernel"
)

// Optimizer updates parameters in place from their accumulated gradients.
// It keeps per-parameter state (moments) keyed by the *Param, allocated on
// the first Step that sees that parameter; later Steps do not allocate.
// Step does not zero the gradients; call ZeroGrad before the next Backward.
type Optimizer interface {
	Step(params []*Param)
	// LR returns the current learning rate.
	LR() float32
	// SetLR changes the learning rate (for annealing).
	SetLR(lr float32)
}

// AdamConfig configures Adam (Kingma & Ba 2015). Zero fields take the
// PyTorch defaults shown.
type AdamConfig struct {
	LR    float32 // default 3e-4
	Beta1 float32 // default 0.9
	Beta2 float32 // default 0.999
	Eps   float32 // default 1e-8 (CleanRL's PPO uses 1e-5)
	// WeightDecay is L2 regularisation: g += WeightDecay·θ (torch.optim.Adam),
	// or, with Decoupled, θ −= LR·WeightDecay·θ (AdamW, Loshchilov & Hutter 2019).
	WeightDecay float32
	Decoupled   bool
}

// Validate reports every problem with the config.
func (c AdamConfig) Validate() error {
	var errs []error
	if c.LR < 0 || isBad(c.LR) {
		errs = append(errs, fmt.Errorf("%w: Adam LR = %v", ErrConfig, c.LR))
	}
	if c.Beta1 < 0 || c.Beta1 >= 1 {
		errs = append(errs, fmt.Errorf("%w: Adam Beta1 = %v, want [0,1)", ErrConfig, c.Beta1))
	}
	if c.Beta2 < 0 || c.Beta2 >= 1 {
		errs = append(errs, fmt.Errorf("%w: Adam Beta2 = %v, want [0,1)", ErrConfig, c.Beta2))
	}
	if c.Eps < 0 || c.WeightDecay < 0 {
		errs = append(errs, fmt.Errorf("%w: Adam Eps = %v, WeightDecay = %v, want ≥ 0", ErrConfig, c.Eps, c.WeightDecay))
	}
	return errors.Join(errs...)
}

func isBad(x float32) bool { return math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) }

// Adam implements Adam with PyTorch's update order:
//
//	m ← β1·m + (1−β1)·g,  v ← β2·v + (1−β2)·g²
//	θ ← θ − lr/(1−β1ᵗ) · m / (√v/√(1−β2ᵗ) + ε)
type Adam struct {
	cfg   AdamConfig
	state map[*Param]*adamState
}

type adamState struct {
	t    int
	m, v []float32
}

// NewAdam returns an Adam optimizer; invalid settings are an error.
func NewAdam(cfg AdamConfig) (*Adam, error) {
	if cfg.LR == 0 {
		cfg.LR = 3e-4
	}
	if cfg.Beta1 == 0 {
		cfg.Beta1 = 0.9
	}
	if cfg.Beta2 == 0 {
		cfg.Beta2 = 0.999
	}
	if cfg.Eps == 0 {
		cfg.Eps = 1e-8
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Adam{cfg: cfg, state: map[*Param]*adamState{}}, nil
}

// LR returns the current learning rate.
func (o *Adam) LR() float32 { return o.cfg.LR }

// SetLR sets the learning rate.
func (o *Adam) SetLR(lr float32) { o.cfg.LR = lr }

// Step applies one Adam update to every parameter.
func (o *Adam) Step(params []*Param) {
	c := o.cfg
	// Parameters normally share one step count: the bias corrections
	// (two math.Pow) are computed once per distinct count, not per tensor.
	lastT, step, rbc2 := 0, float32(0), float32(0)
	for _, p := range params {
		s := o.state[p]
		if s == nil {
			s = &adamState{m: make([]float32, len(p.Value)), v: make([]float32, len(p.Value))}
			o.state[p] = s
		}
		s.t++
		if s.t != lastT {
			bc1 := 1 - math.Pow(float64(c.Beta1), float64(s.t))
			bc2 := 1 - math.Pow(float64(c.Beta2), float64(s.t))
			step = float32(float64(c.LR) / bc1)
			rbc2 = float32(1 / math.Sqrt(bc2))
			lastT = s.t
		}
		adamUpdate(p.Value, p.Grad, s.m, s.v, c.Beta1, c.Beta2, c.Eps, step, rbc2, c.WeightDecay, c.Decoupled, c.LR)
	}
}

func adamUpdate(w, g, m, v []float32, b1, b2, eps, step, rbc2, wd float32, decoupled bool, lr float32) {
	if wd == 0 {
		kernel.Adam(true, w, g, m, v, b1, b2, eps, step, rbc2)
		return
	}
	g = g[:len(w)]
	m = m[:len(w)]
	v = v[:len(w)]
	for i, gi := range g {
		if wd != 0 {
			if decoupled {
				w[i] -= lr * wd * w[i]
			} else {
				gi += wd * w[i]
			}
		}
		mi := b1*m[i] + (1-b1)*gi
		vi := b2*v[i] + (1-b2)*gi*gi
		m[i], v[i] = mi, vi
		w[i] -= step * mi / (sqrt32(vi)*rbc2 + eps)
	}
}

func sqrt32(x float32) float32 { return float32(math.Sqrt(float64(x))) }

// SGD is stochastic gradient descent with optional momentum (PyTorch form:
// b ← μ·b + g, θ ← θ − lr·b) and L2 weight decay.
type SGD struct {
	lr, momentum, wd float32
	buf              map[*Param][]float32
}

// NewSGD returns an SGD optimizer.
func NewSGD(lr, momentum, weightDecay float32) (*SGD, error) {
	if lr < 0 || momentum < 0 || momentum >= 1 || weightDecay < 0 || isBad(lr) {
		return nil, fmt.Errorf("%w: SGD lr=%v momentum=%v weightDecay=%v", ErrConfig, lr, momentum, weightDecay)
	}
	return &SGD{lr: lr, momentum: momentum, wd: weightDecay, buf: map[*Param][]float32{}}, nil
}

// LR returns the learning rate.
func (o *SGD) LR() float32 { return o.lr }

// SetLR sets the learning rate.
func (o *SGD) SetLR(lr float32) { o.lr = lr }

// Step applies one SGD update.
func (o *SGD) Step(params []*Param) {
	for _, p := range params {
		var b []float32
		if o.momentum != 0 {
			b = o.buf[p]
			if b == nil {
				b = make([]float32, len(p.Value))
				o.buf[p] = b
			}
		}
		for i, g := range p.Grad[:len(p.Value)] {
			g += o.wd * p.Value[i]
			if b != nil {
				b[i] = o.momentum*b[i] + g
				g = b[i]
			}
			p.Value[i] -= o.lr * g
		}
	}
}

// RMSPropConfig configures RMSProp (Hinton 2012; torch.optim.RMSprop).
// Zero fields take the defaults shown.
type RMSPropConfig struct {
	LR    float32 // default 1e-2
	Alpha float32 // smoothing, default 0.99
	Eps   float32 // default 1e-8 (Stable-Baselines3's A2C uses 1e-5)
	// Centered divides by an estimate of the gradient's standard deviation
	// rather than its root mean square (torch's centered=True; Graves
	// 2013's variant, which DeepMind's DQN and MinAtar's examples use).
	Centered bool
}

// RMSProp as torch.optim.RMSprop without momentum or weight decay:
// v ← α·v + (1−α)·g², θ ← θ − lr·g/(√v + ε); centered, also
// ḡ ← α·ḡ + (1−α)·g and the denominator √(v − ḡ²) + ε.
type RMSProp struct {
	cfg RMSPropConfig
	sq  map[*Param][]float32
	avg map[*Param][]float32 // ḡ, centered only
}

// NewRMSProp returns an RMSProp optimizer.
func NewRMSProp(cfg RMSPropConfig) (*RMSProp, error) {
	if cfg.LR == 0 {
		cfg.LR = 1e-2
	}
	if cfg.Alpha == 0 {
		cfg.Alpha = 0.99
	}
	if cfg.Eps == 0 {
		cfg.Eps = 1e-8
	}
	if cfg.LR < 0 || isBad(cfg.LR) || cfg.Alpha < 0 || cfg.Alpha >= 1 || cfg.Eps < 0 {
		return nil, fmt.Errorf("%w: RMSProp %+v", ErrConfig, cfg)
	}
	return &RMSProp{cfg: cfg, sq: map[*Param][]float32{}, avg: map[*Param][]float32{}}, nil
}

// LR returns the learning rate.
func (o *RMSProp) LR() float32 { return o.cfg.LR }

// SetLR sets the learning rate.
func (o *RMSProp) SetLR(lr float32) { o.cfg.LR = lr }

// Step applies one RMSProp update.
func (o *RMSProp) Step(params []*Param) {
	for _, p := range params {
		v := o.sq[p]
		if v == nil {
			v = make([]float32, len(p.Value))
			o.sq[p] = v
		}
		var m []float32
		if o.cfg.Centered {
			if m = o.avg[p]; m == nil {
				m = make([]float32, len(p.Value))
				o.avg[p] = m
			}
		}
		kernel.RMSProp(true, p.Value, p.Grad, v, m, o.cfg.Alpha, o.cfg.LR, o.cfg.Eps)
	}
}

// LinearSchedule returns start + (end−start)·min(step/total, 1): linear
// annealing. CleanRL's PPO learning-rate annealing is
// LinearSchedule(lr, 0, update−1, numUpdates) (frac = 1 − (update−1)/numUpdates).
func LinearSchedule(start, end float32, step, total int) float32 {
	if total <= 0 || step >= total {
		return end
	}
	if step <= 0 {
		return start
	}
	f := float64(step) / float64(total)
	return float32(float64(start) + (float64(end)-float64(start))*f)
}

// GradNorm returns the global L2 norm of all gradients: each parameter's
// sum of squares in float64 (kernel.SumSquares, the same bits on every
// path), added in parameter order.
func GradNorm(params []*Param) float64 {
	var s float64
	for _, p := range params {
		s += kernel.SumSquares(true, p.Grad)
	}
	return math.Sqrt(s)
}

// ClipGradNorm scales all gradients by min(1, maxNorm/(norm+1e-6)) where
// norm is the global L2 norm (torch.nn.utils.clip_grad_norm_) and returns
// the norm before clipping.
func ClipGradNorm(params []*Param, maxNorm float32) float64 {
	n := GradNorm(params)
	coef := float64(maxNorm) / (n + 1e-6)
	if coef < 1 {
		c := float32(coef)
		for _, p := range params {
			kernel.Scale(true, p.Grad, c)
		}
	}
	return n
}

// HardUpdate copies src's values into dst (target ← online). Gradients are
// not copied.
func HardUpdate(dst, src []*Param) error {
	if err := checkLists("HardUpdate", dst, src); err != nil {
		return err
	}
	for i := range dst {
		copy(dst[i].Value, src[i].Value)
	}
	return nil
}

// PolyakUpdate moves dst towards src: θ' ← τ·θ + (1−τ)·θ' (soft target
// update; DDPG, TD3, SAC use τ = 0.005).
func PolyakUpdate(dst, src []*Param, tau float32) error {
	if tau < 0 || tau > 1 || isBad(tau) {
		return fmt.Errorf("%w: PolyakUpdate tau = %v, want [0,1]", ErrConfig, tau)
	}
	if err := checkLists("PolyakUpdate", dst, src); err != nil {
		return err
	}
	for i := range dst {
		d, s := dst[i].Value, src[i].Value[:len(dst[i].Value)]
		for j, v := range s {
			d[j] = tau*v + (1-tau)*d[j]
		}
	}
	return nil
}
