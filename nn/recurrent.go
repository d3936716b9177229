package nn

import (
	"fmt"
	"math"
	"math/rand/v2"

	"herd/internal/scratch"
)

// Recurrent layers (LSTM, GRU) run over whole sequences: Forward takes T
// time steps of B sequences (time-major, x[t][b][in]) from a given initial
// state, Backward back-propagates through all T steps (truncated BPTT over
// one segment) and accumulates every parameter's gradient.
//
// Episode boundaries: starts[t·B+b] true means sequence b begins a new
// episode at step t, so the state it carries into step t is zeroed first,
// as CleanRL's ppo_atari_lstm does with (1 − done)·h. No gradient flows
// across such a boundary.
//
// Parameters follow PyTorch's nn.LSTM / nn.GRU (one layer): names
// prefix+"weight_ih_l0" [G·H, in], "weight_hh_l0" [G·H, H], "bias_ih_l0"
// and "bias_hh_l0" [G·H], gate blocks in PyTorch's order (LSTM: input,
// forget, cell, output; GRU: reset, update, new), initialised uniform in
// ±1/√H as PyTorch does.

// recurrent holds what LSTM and GRU share: shapes, parameters, the input
// product and the workspaces of one sequence.
type recurrent struct {
	in, hidden, gates  int // gates: 4 (LSTM) or 3 (GRU) blocks of hidden
	wih, whh, bih, bhh *Param
	gemm               Gemm

	t, b   int
	x      []float32 // the last Forward's input
	wihT   []float32 // W_ihᵀ, in × G·H
	whhT   []float32 // W_hhᵀ, H × G·H
	xg     []float32 // x·W_ihᵀ + b_ih, (T·B) × G·H
	hprev  []float32 // the state each step starts from (after resets), (T·B) × H
	hs     []float32 // outputs h_t, (T·B) × H
	dg     []float32 // dL/d(pre-activation gates), (T·B) × G·H
	dx     []float32 // dL/dx, (T·B) × in
	dh     []float32 // dL/dh carried to the step before, B × H
	dhTmp  []float32 // B × H
	starts []bool
}

func newRecurrent(prefix string, in, hidden, gates int, g Gemm, r *rand.Rand) (*recurrent, error) {
	if in <= 0 || hidden <= 0 {
		return nil, fmt.Errorf("%w: recurrent layer with %d inputs and %d hidden units", ErrConfig, in, hidden)
	}
	if r == nil {
		return nil, fmt.Errorf("%w: a recurrent layer needs a *rand.Rand (see internal/rng)", ErrConfig)
	}
	if g == nil {
		g = DefaultGemm()
	}
	gh := gates * hidden
	l := &recurrent{
		in: in, hidden: hidden, gates: gates, gemm: g,
		wih: NewParam(prefix+"weight_ih_l0", gh, in),
		whh: NewParam(prefix+"weight_hh_l0", gh, hidden),
		bih: NewParam(prefix+"bias_ih_l0", gh),
		bhh: NewParam(prefix+"bias_hh_l0", gh),
	}
	bound := 1 / math.Sqrt(float64(hidden))
	for _, p := range l.params() {
		UniformInit(p.Value, bound, r)
	}
	return l, nil
}

func (l *recurrent) params() []*Param { return []*Param{l.wih, l.whh, l.bih, l.bhh} }

// begin checks the shapes, sizes the workspaces and computes x·W_ihᵀ + b_ih
// for every step at once.
func (l *recurrent) begin(name string, x []float32, t, b int, h0 []float32, starts []bool) {
	if t <= 0 || b <= 0 || len(x) != t*b*l.in || len(h0) != b*l.hidden || (starts != nil && len(starts) != t*b) {
		shapePanic("nn: %s.Forward: T %d, B %d, len(x) %d (want T·B·%d), len(h0) %d (want B·%d), len(starts) %d",
			name, t, b, len(x), l.in, len(h0), l.hidden, len(starts))
	}
	gh := l.gates * l.hidden
	l.t, l.b, l.x, l.starts = t, b, x, starts
	l.wihT = scratch.Resize(l.wihT, l.in*gh)
	l.whhT = scratch.Resize(l.whhT, l.hidden*gh)
	transposeTo(l.wihT, l.wih.Value, gh, l.in)
	transposeTo(l.whhT, l.whh.Value, gh, l.hidden)
	l.xg = scratch.Resize(l.xg, t*b*gh)
	l.hprev = scratch.Resize(l.hprev, t*b*l.hidden)
	l.hs = scratch.Resize(l.hs, t*b*l.hidden)
	for r := range t * b {
		copy(l.xg[r*gh:(r+1)*gh], l.bih.Value)
	}
	l.gemm.Sgemm(false, false, t*b, gh, l.in, 1, x, l.in, l.wihT, gh, 1, l.xg, gh)
}

// maskStarts copies src into dst (B·H values) with the rows of the
// sequences that start at step s zeroed: in the forward pass, the state
// step s starts from; in the backward pass, the gradient carried past it.
func (l *recurrent) maskStarts(dst, src []float32, s int) {
	h := l.hidden
	for j := range l.b {
		if l.starts != nil && l.starts[s*l.b+j] {
			clear(dst[j*h : (j+1)*h])
		} else {
			copy(dst[j*h:(j+1)*h], src[j*h:(j+1)*h])
		}
	}
}

// finish adds the parameter gradients of the whole sequence from dg and
// returns dL/dx.
func (l *recurrent) finish() []float32 {
	h := l.hidden
	l.gemm.Sgemm(true, false, l.gates*h, h, l.t*l.b, 1, l.dg, l.gates*h, l.hprev, h, 1, l.whh.Grad, h)
	return l.finishInput()
}

// The gate activations run in float32, as PyTorch's CPU LSTM computes
// them: a float64 math.Exp or math.Tanh per gate value costs more than the
// gate products themselves at the widths PPO uses.

// exp32 is e^x in float32 by Cephes' expf: x = n·ln 2 + r with |r| ≤
// ln 2 / 2 (ln 2 split in two for an exact n·ln 2), a degree-7
// polynomial for e^r, then the exponent bits of 2^n. x above 88 gives
// +Inf and below −87 gives 0 (where 2^n would leave the normal range).
func exp32(x float32) float32 {
	if x > 88 {
		return float32(math.Inf(1))
	}
	if x < -87 {
		return 0
	}
	n := float32(math.Floor(float64(x*1.44269504088896341 + 0.5)))
	r := x - n*0.693359375
	r -= n * -2.12194440e-4
	p := ((((1.9875691500e-4*r+1.3981999507e-3)*r+8.3334519073e-3)*r+4.1665795894e-2)*r+1.6666665459e-1)*r + 5.0000001201e-1
	p = p*r*r + r + 1
	return p * math.Float32frombits(uint32(int32(n)+127)<<23)
}

// sigmoid32 is 1/(1 + e^−x) in float32.
func sigmoid32(x float32) float32 { return 1 / (1 + exp32(-x)) }

// gateTanh is tanh in float32 by Cephes' tanhf: an odd polynomial for
// |x| < 0.625, where 1 − 2/(e^2|x| + 1) would cancel, else that form
// with the sign restored.
func gateTanh(x float32) float32 {
	a := x
	if a < 0 {
		a = -a
	}
	if a < 0.625 {
		z := x * x
		return ((((-5.70498872745e-3*z+2.06390887954e-2)*z-5.37397155531e-2)*z+1.33314422036e-1)*z-3.33332819422e-1)*z*x + x
	}
	t := 1 - 2/(exp32(2*a)+1)
	if x < 0 {
		return -t
	}
	return t
}

// LSTM is a one-layer long short-term memory (Hochreiter and Schmidhuber
// 1997) in PyTorch's formulation:
//
//	i = σ(W_ii x + b_ii + W_hi h + b_hi)   f = σ(W_if x + b_if + W_hf h + b_hf)
//	g = tanh(W_ig x + b_ig + W_hg h + b_hg) o = σ(W_io x + b_io + W_ho h + b_ho)
//	c' = f ⊙ c + i ⊙ g                      h' = o ⊙ tanh(c')
//
// See the package's notes on recurrent layers above for shapes, resets and
// names. Not safe for concurrent use.
type LSTM struct {
	*recurrent
	cprev []float32 // the cell state each step starts from (after resets), (T·B) × H
	cs    []float32 // c_t, (T·B) × H
	tcs   []float32 // tanh(c_t), (T·B) × H
	acts  []float32 // i, f, g, o after their activations, (T·B) × 4H
	dc    []float32 // dL/dc carried to the step before, B × H
	hT    []float32 // B × H scratch
}

// NewLSTM builds an LSTM with in inputs and hidden units, parameters named
// prefix+"weight_ih_l0" etc. and drawn from r. A nil g means DefaultGemm.
func NewLSTM(prefix string, in, hidden int, g Gemm, r *rand.Rand) (*LSTM, error) {
	rec, err := newRecurrent(prefix, in, hidden, 4, g, r)
	if err != nil {
		return nil, err
	}
	return &LSTM{recurrent: rec}, nil
}

// Params returns weight_ih, weight_hh, bias_ih and bias_hh, PyTorch's order.
func (l *LSTM) Params() []*Param { return l.params() }

// Forward runs T steps of B sequences (x time-major, T·B·in values) from
// the state (h0, c0) (B·H values each) with resets at starts (nil: none),
// and returns every step's output h_t ((T·B)·H values, valid until the next
// Forward). FinalState gives (h_T, c_T).
func (l *LSTM) Forward(x []float32, t, b int, h0, c0 []float32, starts []bool) []float32 {
	l.begin("LSTM", x, t, b, h0, starts)
	if len(c0) != b*l.hidden {
		shapePanic("nn: LSTM.Forward: len(c0) = %d, want B·%d", len(c0), l.hidden)
	}
	h, gh := l.hidden, 4*l.hidden
	l.cprev = scratch.Resize(l.cprev, t*b*h)
	l.cs = scratch.Resize(l.cs, t*b*h)
	l.tcs = scratch.Resize(l.tcs, t*b*h)
	l.acts = scratch.Resize(l.acts, t*b*gh)
	hp, cp := h0, c0
	for s := range t {
		rows := s * b
		hpr := l.hprev[rows*h : (rows+b)*h]
		cpr := l.cprev[rows*h : (rows+b)*h]
		l.maskStarts(hpr, hp, s)
		l.maskStarts(cpr, cp, s)
		gates := l.acts[rows*gh : (rows+b)*gh]
		copy(gates, l.xg[rows*gh:(rows+b)*gh])
		for j := range b {
			row := gates[j*gh : (j+1)*gh]
			for k, v := range l.bhh.Value {
				row[k] += v
			}
		}
		l.gemm.Sgemm(false, false, b, gh, h, 1, hpr, h, l.whhT, gh, 1, gates, gh)
		hn := l.hs[rows*h : (rows+b)*h]
		cn := l.cs[rows*h : (rows+b)*h]
		tcn := l.tcs[rows*h : (rows+b)*h]
		for j := range b {
			g := gates[j*gh : (j+1)*gh]
			for k := range h {
				ig, fg := sigmoid32(g[k]), sigmoid32(g[h+k])
				gg, og := gateTanh(g[2*h+k]), sigmoid32(g[3*h+k])
				g[k], g[h+k], g[2*h+k], g[3*h+k] = ig, fg, gg, og
				c := fg*cpr[j*h+k] + ig*gg
				tc := gateTanh(c)
				cn[j*h+k], tcn[j*h+k] = c, tc
				hn[j*h+k] = og * tc
			}
		}
		hp, cp = hn, cn
	}
	return l.hs[:t*b*h]
}

// FinalState returns the last step's (h, c), B·H values each, valid until
// the next Forward.
func (l *LSTM) FinalState() (h, c []float32) {
	n := l.hidden * l.b
	off := (l.t - 1) * n
	return l.hs[off : off+n], l.cs[off : off+n]
}

// Backward takes dL/dh_t for every step of the last Forward ((T·B)·H
// values), adds every parameter's gradient to its Grad, and returns
// dL/dx ((T·B)·in values, valid until the next Backward). The gradient
// with respect to (h0, c0) is InitialGrad's.
func (l *LSTM) Backward(dhs []float32) []float32 {
	t, b, h, gh := l.t, l.b, l.hidden, 4*l.hidden
	if len(dhs) != t*b*h {
		shapePanic("nn: LSTM.Backward: len(dh) = %d, want T·B·%d", len(dhs), h)
	}
	l.dg = scratch.Resize(l.dg, t*b*gh)
	l.dh = scratch.Resize(l.dh, b*h)
	l.dc = scratch.Resize(l.dc, b*h)
	l.dhTmp = scratch.Resize(l.dhTmp, b*h)
	l.hT = scratch.Resize(l.hT, b*h)
	clear(l.dh)
	clear(l.dc)
	for s := t - 1; s >= 0; s-- {
		rows := s * b
		a := l.acts[rows*gh : (rows+b)*gh]
		dg := l.dg[rows*gh : (rows+b)*gh]
		tcs := l.tcs[rows*h : (rows+b)*h]
		cpr := l.cprev[rows*h : (rows+b)*h]
		for j := range b {
			for k := range h {
				q := j*h + k
				ig, fg, gg, og := a[j*gh+k], a[j*gh+h+k], a[j*gh+2*h+k], a[j*gh+3*h+k]
				dh := dhs[rows*h+q] + l.dh[q]
				tc := tcs[q]
				dc := l.dc[q] + dh*og*(1-tc*tc)
				d := dg[j*gh : (j+1)*gh]
				d[k] = dc * gg * ig * (1 - ig)
				d[h+k] = dc * cpr[q] * fg * (1 - fg)
				d[2*h+k] = dc * ig * (1 - gg*gg)
				d[3*h+k] = dh * tc * og * (1 - og)
				l.hT[q] = dc * fg // dL/dc̃ of this step
			}
		}
		l.maskStarts(l.dc, l.hT, s)
		for j := range b {
			row := dg[j*gh : (j+1)*gh]
			for k, v := range row {
				l.bhh.Grad[k] += v
			}
		}
		l.gemm.Sgemm(false, false, b, h, gh, 1, dg, gh, l.whh.Value, h, 0, l.dhTmp, h)
		l.maskStarts(l.dh, l.dhTmp, s)
	}
	return l.finish()
}

// InitialGrad returns dL/dh0 and dL/dc0 of the last Backward (B·H values
// each, zero for sequences that start at step 0).
func (l *LSTM) InitialGrad() (dh0, dc0 []float32) { return l.dh, l.dc }

// GRU is a one-layer gated recurrent unit (Cho et al. 2014) in PyTorch's
// formulation:
//
//	r = σ(W_ir x + b_ir + W_hr h + b_hr)   z = σ(W_iz x + b_iz + W_hz h + b_hz)
//	n = tanh(W_in x + b_in + r ⊙ (W_hn h + b_hn))
//	h' = (1 − z) ⊙ n + z ⊙ h
//
// See the package's notes on recurrent layers above for shapes, resets and
// names. Not safe for concurrent use.
type GRU struct {
	*recurrent
	acts []float32 // r, z, n after their activations, (T·B) × 3H
	hn   []float32 // W_hn h + b_hn, (T·B) × H
	hg   []float32 // h·W_hhᵀ + b_hh of one step, B × 3H
}

// NewGRU builds a GRU with in inputs and hidden units, parameters named
// prefix+"weight_ih_l0" etc. and drawn from r. A nil g means DefaultGemm.
func NewGRU(prefix string, in, hidden int, g Gemm, r *rand.Rand) (*GRU, error) {
	rec, err := newRecurrent(prefix, in, hidden, 3, g, r)
	if err != nil {
		return nil, err
	}
	return &GRU{recurrent: rec}, nil
}

// Params returns weight_ih, weight_hh, bias_ih and bias_hh, PyTorch's order.
func (l *GRU) Params() []*Param { return l.params() }

// Forward runs T steps of B sequences (x time-major) from the state h0
// (B·H values) with resets at starts (nil: none), and returns every
// step's output h_t ((T·B)·H values, valid until the next Forward).
func (l *GRU) Forward(x []float32, t, b int, h0 []float32, starts []bool) []float32 {
	l.begin("GRU", x, t, b, h0, starts)
	h, gh := l.hidden, 3*l.hidden
	l.acts = scratch.Resize(l.acts, t*b*gh)
	l.hn = scratch.Resize(l.hn, t*b*h)
	l.hg = scratch.Resize(l.hg, b*gh)
	hp := h0
	for s := range t {
		rows := s * b
		hpr := l.hprev[rows*h : (rows+b)*h]
		l.maskStarts(hpr, hp, s)
		for j := range b {
			copy(l.hg[j*gh:(j+1)*gh], l.bhh.Value)
		}
		l.gemm.Sgemm(false, false, b, gh, h, 1, hpr, h, l.whhT, gh, 1, l.hg, gh)
		a := l.acts[rows*gh : (rows+b)*gh]
		xg := l.xg[rows*gh : (rows+b)*gh]
		hnr := l.hn[rows*h : (rows+b)*h]
		out := l.hs[rows*h : (rows+b)*h]
		for j := range b {
			for k := range h {
				q := j*h + k
				r := sigmoid32(xg[j*gh+k] + l.hg[j*gh+k])
				z := sigmoid32(xg[j*gh+h+k] + l.hg[j*gh+h+k])
				hnv := l.hg[j*gh+2*h+k]
				n := gateTanh(xg[j*gh+2*h+k] + r*hnv)
				a[j*gh+k], a[j*gh+h+k], a[j*gh+2*h+k] = r, z, n
				hnr[q] = hnv
				out[q] = (1-z)*n + z*hpr[q]
			}
		}
		hp = out
	}
	return l.hs[:t*b*h]
}

// FinalState returns the last step's h (B·H values), valid until the next
// Forward.
func (l *GRU) FinalState() []float32 {
	n := l.hidden * l.b
	return l.hs[(l.t-1)*n : l.t*n]
}

// Backward takes dL/dh_t for every step of the last Forward, adds every
// parameter's gradient to its Grad, and returns dL/dx ((T·B)·in values,
// valid until the next Backward). InitialGrad gives dL/dh0.
func (l *GRU) Backward(dhs []float32) []float32 {
	t, b, h, gh := l.t, l.b, l.hidden, 3*l.hidden
	if len(dhs) != t*b*h {
		shapePanic("nn: GRU.Backward: len(dh) = %d, want T·B·%d", len(dhs), h)
	}
	l.dg = scratch.Resize(l.dg, t*b*gh)
	l.dh = scratch.Resize(l.dh, b*h)
	l.dhTmp = scratch.Resize(l.dhTmp, b*h)
	clear(l.dh)
	// dgh holds dL/d(h·W_hhᵀ + b_hh) of one step; it differs from the
	// input-side gate gradient in the n block (multiplied by r there).
	dgh := l.hg
	for s := t - 1; s >= 0; s-- {
		rows := s * b
		a := l.acts[rows*gh : (rows+b)*gh]
		dg := l.dg[rows*gh : (rows+b)*gh]
		hpr := l.hprev[rows*h : (rows+b)*h]
		hnr := l.hn[rows*h : (rows+b)*h]
		for j := range b {
			for k := range h {
				q := j*h + k
				r, z, n := a[j*gh+k], a[j*gh+h+k], a[j*gh+2*h+k]
				dh := dhs[rows*h+q] + l.dh[q]
				dn := dh * (1 - z) * (1 - n*n) // dL/d(pre-tanh n)
				dz := dh * (hpr[q] - n) * z * (1 - z)
				dr := dn * hnr[q] * r * (1 - r)
				dg[j*gh+k], dg[j*gh+h+k], dg[j*gh+2*h+k] = dr, dz, dn
				dgh[j*gh+k], dgh[j*gh+h+k], dgh[j*gh+2*h+k] = dr, dz, dn*r
				l.dhTmp[q] = dh * z
			}
		}
		for j := range b {
			row := dgh[j*gh : (j+1)*gh]
			for k, v := range row {
				l.bhh.Grad[k] += v
			}
		}
		// dW_hh += dghᵀ·h̃ (per step: the hidden side's n block differs
		// from dg's, so it cannot join finish's product).
		l.gemm.Sgemm(true, false, gh, h, b, 1, dgh, gh, hpr, h, 1, l.whh.Grad, h)
		l.gemm.Sgemm(false, false, b, h, gh, 1, dgh, gh, l.whh.Value, h, 1, l.dhTmp, h)
		l.maskStarts(l.dh, l.dhTmp, s)
	}
	return l.finishInput()
}

// finishInput is finish without the W_hh product, which GRU's Backward
// takes per step.
func (l *recurrent) finishInput() []float32 {
	t, b, gh := l.t, l.b, l.gates*l.hidden
	l.gemm.Sgemm(true, false, gh, l.in, t*b, 1, l.dg, gh, l.x, l.in, 1, l.wih.Grad, l.in)
	for r := range t * b {
		row := l.dg[r*gh : (r+1)*gh]
		for k, v := range row {
			l.bih.Grad[k] += v
		}
	}
	l.dx = scratch.Resize(l.dx, t*b*l.in)
	l.gemm.Sgemm(false, false, t*b, l.in, gh, 1, l.dg, gh, l.wih.Value, l.in, 0, l.dx, l.in)
	return l.dx
}

// InitialGrad returns dL/dh0 of the last Backward (B·H values, zero for
// sequences that start at step 0).
func (l *GRU) InitialGrad() []float32 { return l.dh }
