package nn

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"

	"herd/internal/scratch"
)

// MLPConfig describes a multi-layer perceptron: In inputs, one Linear +
// activation per entry of Hidden, then a Linear to Out outputs.
type MLPConfig struct {
	// In is the input width (observation size, or obs+action for a critic).
	In int
	// Hidden lists the hidden layer widths, e.g. {64, 64}. May be empty.
	Hidden []int
	// Out is the output width (logits, action mean, Q-values, 1 for a value).
	Out int
	// Act is the hidden activation; ActDefault means ReLU.
	Act Activation
	// OutAct is the output activation; ActDefault means Identity.
	OutAct Activation
	// Init selects weight initialisation; the zero value is PyTorch's
	// nn.Linear default.
	Init Init
	// Gemm is the matrix-multiply backend; nil means DefaultGemm().
	Gemm Gemm
	// FirstIndex is the module index of the first Linear in an enclosing
	// nn.Sequential (ConvNet's head follows its encoder): Linear i is
	// named "<FirstIndex+2i>.weight". 0 for a network of its own.
	FirstIndex int
}

// Validate reports every problem with the config at once.
func (c MLPConfig) Validate() error {
	var errs []error
	if c.In <= 0 {
		errs = append(errs, fmt.Errorf("%w: MLP In = %d, want > 0", ErrConfig, c.In))
	}
	if c.Out <= 0 {
		errs = append(errs, fmt.Errorf("%w: MLP Out = %d, want > 0", ErrConfig, c.Out))
	}
	for i, h := range c.Hidden {
		if h <= 0 {
			errs = append(errs, fmt.Errorf("%w: MLP Hidden[%d] = %d, want > 0", ErrConfig, i, h))
		}
	}
	if !c.Act.valid() {
		errs = append(errs, fmt.Errorf("%w: MLP Act = %v", ErrConfig, c.Act))
	}
	if !c.OutAct.valid() {
		errs = append(errs, fmt.Errorf("%w: MLP OutAct = %v", ErrConfig, c.OutAct))
	}
	if c.FirstIndex < 0 {
		errs = append(errs, fmt.Errorf("%w: MLP FirstIndex = %d, want ≥ 0", ErrConfig, c.FirstIndex))
	}
	if c.Init.Kind < InitTorchDefault || c.Init.Kind > InitKaimingUniform {
		errs = append(errs, fmt.Errorf("%w: MLP Init.Kind = %d", ErrConfig, c.Init.Kind))
	}
	return errors.Join(errs...)
}

// linear is one fully connected layer with its activation and workspaces.
type linear struct {
	in, out int
	act     Activation // resolved: never ActDefault
	w, b    *Param     // w.Value is [in][out]
	y       []float32  // post-activation output, batch×out
	dz      []float32  // gradient w.r.t. the pre-activation, batch×out
	dx      []float32  // gradient w.r.t. the layer input, batch×in
	wT      []float32  // Wᵀ ([out][in]) scratch for dX = dZ·Wᵀ on the native backend
}

// MLP is a multi-layer perceptron with a forward pass into preallocated
// workspaces and an explicit per-layer backward pass.
//
// Forward keeps each layer's output; Backward uses the outputs of the most
// recent Forward and accumulates into the parameters' Grad. Workspaces size
// themselves to the largest batch seen, so after one call at the largest
// batch neither Forward nor Backward allocates.
//
// Cost: one GEMM per layer forward (fused bias and ReLU on the native
// backend), two per layer backward (dW = Xᵀ·dZ, dX = dZ·Wᵀ) plus a bias
// column sum. Everything runs on the calling goroutine, in a fixed order,
// so results do not depend on GOMAXPROCS; BackwardSplit hands the second
// layer's dW to a caller-supplied Splitter, with the same bits.
//
// An MLP is not safe for concurrent use. Give every actor goroutine its own
// Clone and refresh it with CopyFrom.
type MLP struct {
	cfg    MLPConfig
	layers []linear
	params []*Param
	gemm   Gemm
	fused  fusedGemm // non-nil when gemm offers the fused kernels
	x      []float32 // copy of the last Forward input
	batch  int
	one    [1]float32 // the constant 1 read with stride 0 for bias gradients

	// BackwardSplit's job: the second layer's parameter gradients from its
	// dZ (gDz) and the first layer's output recomputed into gIn.
	gIn, gDz []float32
	gJob     func()
}

// Splitter runs a function beside the caller: Go starts f and returns, Wait
// returns when f is done; one function at a time. internal/twin's Pair
// is one; a nil Splitter means "run it on the caller".
type Splitter interface {
	Go(f func())
	Wait()
}

// NewMLP builds an MLP and initialises its weights from r.
// Parameters are named as PyTorch names an nn.Sequential of alternating
// Linear and activation modules: "0.weight", "0.bias", "2.weight", …
func NewMLP(cfg MLPConfig, r *rand.Rand) (*MLP, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if r == nil {
		return nil, fmt.Errorf("%w: NewMLP needs a *rand.Rand (see internal/rng)", ErrConfig)
	}
	cfg.Hidden = append([]int(nil), cfg.Hidden...)
	if cfg.Gemm == nil {
		cfg.Gemm = DefaultGemm()
	}
	m := &MLP{cfg: cfg, gemm: cfg.Gemm, one: [1]float32{1}}
	m.fused, _ = cfg.Gemm.(fusedGemm)
	sizes := append(append([]int{cfg.In}, cfg.Hidden...), cfg.Out)
	m.layers = make([]linear, len(sizes)-1)
	for i := range m.layers {
		l := &m.layers[i]
		l.in, l.out = sizes[i], sizes[i+1]
		last := i == len(m.layers)-1
		l.act = cfg.Act
		if l.act == ActDefault {
			l.act = ReLU
		}
		if last {
			l.act = cfg.OutAct
			if l.act == ActDefault {
				l.act = Identity
			}
		}
		idx := strconv.Itoa(cfg.FirstIndex + 2*i)
		l.w = NewParam(idx+".weight", l.out, l.in)
		l.w.Transposed = true
		l.b = NewParam(idx+".bias", l.out)
		if err := initLinear(l, cfg.Init, last, r); err != nil {
			return nil, err
		}
		m.params = append(m.params, l.w, l.b)
	}
	return m, nil
}

// Config returns the network's configuration (Gemm resolved).
func (m *MLP) Config() MLPConfig {
	c := m.cfg
	c.Hidden = append([]int(nil), c.Hidden...)
	return c
}

// In returns the input width.
func (m *MLP) In() int { return m.cfg.In }

// Out returns the output width.
func (m *MLP) Out() int { return m.cfg.Out }

// Params returns the trainable parameters in layer order (weight, bias per
// layer). The slice and the Params are the network's own: optimizers update
// them in place.
func (m *MLP) Params() []*Param { return m.params }

// ZeroGrad zeroes every parameter gradient.
func (m *MLP) ZeroGrad() { ZeroGrads(m.params) }

// Reserve sizes the workspaces for batches up to maxBatch, so that the
// first Forward/Backward at that size does not allocate either.
func (m *MLP) Reserve(maxBatch int) {
	m.x = scratch.Resize(m.x, maxBatch*m.cfg.In)[:0]
	for i := range m.layers {
		l := &m.layers[i]
		l.y = scratch.Resize(l.y, maxBatch*l.out)[:0]
		l.dz = scratch.Resize(l.dz, maxBatch*l.out)[:0]
		l.dx = scratch.Resize(l.dx, maxBatch*l.in)[:0]
		if m.fused != nil {
			l.wT = scratch.Resize(l.wT, l.in*l.out)
		}
	}
}

// Forward runs the network on x, batch rows of In values, and returns the
// batch×Out output. The returned slice is the network's workspace: it is
// valid until the next Forward and must not be modified before Backward.
// x is copied, so the caller may reuse it at once.
func (m *MLP) Forward(x []float32, batch int) []float32 {
	if batch < 0 || len(x) != batch*m.cfg.In {
		shapePanic("MLP.Forward: len(x)=%d, want batch %d × In %d", len(x), batch, m.cfg.In)
	}
	m.batch = batch
	m.x = scratch.Resize(m.x, len(x))
	copy(m.x, x)
	in := m.x
	for i := range m.layers {
		l := &m.layers[i]
		l.y = scratch.Resize(l.y, batch*l.out)
		m.forwardLayer(l, in, l.y, batch)
		in = l.y
	}
	return in
}

// forwardLayer writes l's output for batch rows of input in into y.
func (m *MLP) forwardLayer(l *linear, in, y []float32, batch int) {
	if m.fused != nil {
		relu := l.act == ReLU
		m.fused.gemmFused(false, batch, l.out, l.in, in, l.in, l.w.Value, l.out, y, l.out, false, l.b.Value, relu)
		if !relu {
			l.act.applyInPlace(y)
		}
		return
	}
	for r := 0; r < batch; r++ {
		copy(y[r*l.out:(r+1)*l.out], l.b.Value)
	}
	m.gemm.Sgemm(false, false, batch, l.out, l.in, 1, in, l.in, l.w.Value, l.out, 1, y, l.out)
	l.act.applyInPlace(y)
}

// ForwardTo runs Forward and copies the output into dst (batch×Out),
// returning dst. Use it for inference into a caller-owned buffer.
func (m *MLP) ForwardTo(dst, x []float32, batch int) []float32 {
	if len(dst) != batch*m.cfg.Out {
		shapePanic("MLP.ForwardTo: len(dst)=%d, want %d×%d", len(dst), batch, m.cfg.Out)
	}
	copy(dst, m.Forward(x, batch))
	return dst
}

// Backward takes dOut = dL/d(output) (batch×Out, for the batch of the last
// Forward), adds dL/dθ to every parameter's Grad, and returns dL/dx
// (batch×In, a workspace valid until the next Backward). dOut is not
// modified. Losses are usually means over the batch, so dOut usually
// carries the 1/batch factor (the loss and head functions here include it
// where they compute a mean).
func (m *MLP) Backward(dOut []float32) []float32 { return m.backward(dOut, nil, true) }

// BackwardSplit is Backward with the second layer's parameter gradients
// (dW = Xᵀ·dZ and db) computed by s beside the caller, which meanwhile
// computes that layer's input gradient dX = dZ·Wᵀ and goes on to the first
// layer. When input is false the network's own input gradient is not
// computed (the network reads data, not another network's output) and nil
// is returned. s may be nil (all on the caller).
//
// Only that layer, and only where the first layer is narrow (In below the
// second layer's width, as for vector observations): s recomputes the
// first layer's output from the saved input rather than read the caller's,
// so that just that layer's dZ and gradients move between cores. Reading
// data another core just wrote costs several times reading it from one's
// own cache; a split that handed s every layer's dW, reading all the
// caller's activations and dZ, cost more than it saved. The gradients are
// bit-identical to Backward's: the same kernels run on the same operands
// (the recomputed output is the forward pass's, bit for bit), only on
// another goroutine.
func (m *MLP) BackwardSplit(dOut []float32, s Splitter, input bool) []float32 {
	return m.backward(dOut, s, input)
}

func (m *MLP) backward(dOut []float32, s Splitter, input bool) []float32 {
	batch := m.batch
	if len(dOut) != batch*m.cfg.Out {
		shapePanic("MLP.Backward: len(dOut)=%d, want batch %d × Out %d", len(dOut), batch, m.cfg.Out)
	}
	split := s != nil && len(m.layers) >= 2 && m.layers[0].in < m.layers[1].out
	g := dOut
	for i := len(m.layers) - 1; i >= 0; i-- {
		l := &m.layers[i]
		in := m.x
		if i > 0 {
			in = m.layers[i-1].y
		}
		dz := g
		if l.act != Identity {
			l.dz = scratch.Resize(l.dz, batch*l.out)
			l.act.backward(l.dz, g, l.y)
			dz = l.dz
		}
		if split && i == 1 {
			if m.gJob == nil {
				m.gJob = func() {
					l0 := &m.layers[0]
					m.gIn = scratch.Resize(m.gIn, m.batch*l0.out)
					m.forwardLayer(l0, m.x, m.gIn, m.batch)
					m.paramGrads(&m.layers[1], m.gIn, m.gDz)
				}
			}
			m.gDz = dz
			s.Go(m.gJob)
		} else {
			m.paramGrads(l, in, dz)
		}
		if i == 0 && !input {
			g = nil
			break
		}
		l.dx = scratch.Resize(l.dx, batch*l.in)
		if m.fused != nil {
			if batch < smallBatch {
				// Few rows: transposing W would cost more than the
				// product, so take dot products with W's rows directly.
				dotRowsTo(l.dx, dz, l.w.Value, batch, l.in, l.out)
			} else if l.in*l.out > batch*(l.in+l.out) {
				// A wide layer at a modest batch (a conv encoder's
				// flattened output): dXᵀ = W·dZᵀ moves the batch·(in+out)
				// values of dZ and dXᵀ through transposes instead of W's
				// in·out, with the same products summed in the same order.
				l.wT = scratch.Resize(l.wT, l.in*l.out)
				dzT, dxT := l.wT[:l.out*batch], l.wT[l.out*batch:(l.out+l.in)*batch]
				transposeTo(dzT, dz, batch, l.out)
				m.fused.gemmFused(false, l.in, batch, l.out, l.w.Value, l.out, dzT, batch, dxT, batch, false, nil, false)
				transposeTo(l.dx, dxT, l.in, batch)
			} else {
				// dX = dz·Wᵀ through a transposed copy of W, so the
				// kernel streams contiguous rows.
				l.wT = scratch.Resize(l.wT, l.in*l.out)
				transposeTo(l.wT, l.w.Value, l.in, l.out)
				m.fused.gemmFused(false, batch, l.in, l.out, dz, l.out, l.wT, l.in, l.dx, l.in, false, nil, false)
			}
		} else {
			m.gemm.Sgemm(false, true, batch, l.in, l.out, 1, dz, l.out, l.w.Value, l.out, 0, l.dx, l.in)
		}
		g = l.dx
	}
	if split {
		s.Wait()
	}
	return g
}

// paramGrads adds this batch's dW = inᵀ·dz and db = 1ᵀ·dz into l's
// parameter gradients.
func (m *MLP) paramGrads(l *linear, in, dz []float32) {
	batch := m.batch
	if m.fused != nil {
		// db += 1ᵀ·dz: a 1×batch "matrix" of ones read with stride 0,
		// so the column sum runs in the SIMD kernel (adds by FMA
		// with 1, exact as plain adds).
		m.fused.gemmFused(true, 1, l.out, batch, m.one[:], 0, dz, l.out, l.b.Grad, l.out, true, nil, false)
		// dW += inᵀ·dz: A = in stored batch×In, read transposed.
		m.fused.gemmFused(true, l.in, l.out, batch, in, l.in, dz, l.out, l.w.Grad, l.out, true, nil, false)
		return
	}
	db := l.b.Grad
	for r := 0; r < batch; r++ {
		row := dz[r*l.out : (r+1)*l.out]
		for j, v := range row {
			db[j] += v
		}
	}
	m.gemm.Sgemm(true, false, l.in, l.out, batch, 1, in, l.in, dz, l.out, 1, l.w.Grad, l.out)
}

// Clone returns an independent copy of the network (weights and gradients
// copied, fresh workspaces, same backend).
func (m *MLP) Clone() *MLP {
	c := &MLP{cfg: m.Config(), gemm: m.gemm, fused: m.fused, one: m.one}
	c.layers = make([]linear, len(m.layers))
	for i, l := range m.layers {
		nl := linear{in: l.in, out: l.out, act: l.act}
		ps := CloneParams([]*Param{l.w, l.b})
		nl.w, nl.b = ps[0], ps[1]
		c.layers[i] = nl
		c.params = append(c.params, nl.w, nl.b)
	}
	return c
}

// CopyFrom copies src's weights into m (a hard target update, or an actor
// picking up new weights). The architectures must match.
func (m *MLP) CopyFrom(src *MLP) error { return HardUpdate(m.params, src.params) }

// smallBatch is the batch below which Backward computes dX = dZ·Wᵀ by
// dot products instead of transposing W: at tiny batches the transpose
// would cost more than the product itself.
const smallBatch = 8

// dotRowsTo writes dst[r][i] = Σ_j dz[r][j]·w[i][j] for r < batch, i < in
// (w is [in][out]), with four partial sums in a fixed order.
func dotRowsTo(dst, dz, w []float32, batch, in, out int) {
	for r := 0; r < batch; r++ {
		g := dz[r*out : (r+1)*out]
		for i := 0; i < in; i++ {
			wi := w[i*out : (i+1)*out]
			wi = wi[:len(g)]
			var s0, s1, s2, s3 float32
			j := 0
			for ; j+4 <= len(g); j += 4 {
				s0 += g[j] * wi[j]
				s1 += g[j+1] * wi[j+1]
				s2 += g[j+2] * wi[j+2]
				s3 += g[j+3] * wi[j+3]
			}
			for ; j < len(g); j++ {
				s0 += g[j] * wi[j]
			}
			dst[r*in+i] = (s0 + s1) + (s2 + s3)
		}
	}
}
