package nn

import (
	"fmt"
	"math"
	"math/rand/v2"
)

const halfLog2Pi = 0.91893853320467274178 // ½·log(2π)

// DiagGaussian is a diagonal Gaussian policy over Dim continuous action
// dimensions (PPO, A2C on Box spaces).
//
// With a state-independent log-std (CleanRL's PPO: actor_logstd), the
// network outputs Dim means per row and LogStd is a trainable Param of Dim
// values. With a state-dependent log-std the network outputs 2·Dim values
// per row, [μ_1…μ_D, logσ_1…logσ_D], and LogStd is nil. OutDim says which.
//
//	log π(a|s) = Σ_i −½((a_i−μ_i)/σ_i)² − log σ_i − ½log 2π
//	H          = Σ_i ½ + ½log 2π + log σ_i
type DiagGaussian struct {
	Dim    int
	LogStd *Param // nil when the log-std is state-dependent
}

// NewDiagGaussian returns the head. initLogStd initialises the
// state-independent log-std (CleanRL uses 0); it is ignored when
// stateDependent.
func NewDiagGaussian(dim int, stateDependent bool, initLogStd float32) (*DiagGaussian, error) {
	if dim <= 0 {
		return nil, fmt.Errorf("%w: DiagGaussian dim = %d", ErrConfig, dim)
	}
	g := &DiagGaussian{Dim: dim}
	if !stateDependent {
		g.LogStd = NewParam("actor_logstd", 1, dim)
		for i := range g.LogStd.Value {
			g.LogStd.Value[i] = initLogStd
		}
	}
	return g, nil
}

// OutDim is the network output width the head expects per row.
func (g *DiagGaussian) OutDim() int {
	if g.LogStd == nil {
		return 2 * g.Dim
	}
	return g.Dim
}

// Params returns the head's own trainable parameters (the state-independent
// log-std), to be stepped together with the network's.
func (g *DiagGaussian) Params() []*Param {
	if g.LogStd == nil {
		return nil
	}
	return []*Param{g.LogStd}
}

func (g *DiagGaussian) rows(op string, out []float32) int {
	w := g.OutDim()
	if len(out)%w != 0 {
		shapePanic("DiagGaussian.%s: len(out)=%d not a multiple of %d", op, len(out), w)
	}
	return len(out) / w
}

// meanLogStd returns μ_i and log σ_i of row r.
func (g *DiagGaussian) meanLogStd(out []float32, r, i int) (mu, ls float64) {
	w := g.OutDim()
	mu = float64(out[r*w+i])
	if g.LogStd == nil {
		ls = float64(out[r*w+g.Dim+i])
	} else {
		ls = float64(g.LogStd.Value[i])
	}
	return
}

func (g *DiagGaussian) check(op string, b int, bufs ...[]float32) {
	for _, s := range bufs {
		if s != nil && len(s) != b*g.Dim {
			shapePanic("DiagGaussian.%s: buffer of %d, want %d rows × %d", op, len(s), b, g.Dim)
		}
	}
}

// SampleTo draws a = μ + σ·ε with ε ~ N(0, I) from r into dstAct and, if
// dstNoise is non-nil, records ε there (needed for a reparameterised
// backward). It returns dstAct.
func (g *DiagGaussian) SampleTo(dstAct, dstNoise, out []float32, r *rand.Rand) []float32 {
	b := g.rows("SampleTo", out)
	g.check("SampleTo", b, dstAct, dstNoise)
	for row := 0; row < b; row++ {
		for i := 0; i < g.Dim; i++ {
			mu, ls := g.meanLogStd(out, row, i)
			e := r.NormFloat64()
			dstAct[row*g.Dim+i] = float32(mu + math.Exp(ls)*e)
			if dstNoise != nil {
				dstNoise[row*g.Dim+i] = float32(e)
			}
		}
	}
	return dstAct
}

// ModeTo writes the mean action μ (deterministic evaluation) into dst.
func (g *DiagGaussian) ModeTo(dst, out []float32) []float32 {
	b := g.rows("ModeTo", out)
	g.check("ModeTo", b, dst)
	for row := 0; row < b; row++ {
		for i := 0; i < g.Dim; i++ {
			mu, _ := g.meanLogStd(out, row, i)
			dst[row*g.Dim+i] = float32(mu)
		}
	}
	return dst
}

// LogProbTo writes log π(actions_r | row r), summed over dimensions, into
// dst (one per row).
func (g *DiagGaussian) LogProbTo(dst, out, actions []float32) []float32 {
	b := g.rows("LogProbTo", out)
	g.check("LogProbTo", b, actions)
	if len(dst) != b {
		shapePanic("DiagGaussian.LogProbTo: len(dst)=%d, want %d rows", len(dst), b)
	}
	for row := 0; row < b; row++ {
		var s float64
		for i := 0; i < g.Dim; i++ {
			mu, ls := g.meanLogStd(out, row, i)
			z := (float64(actions[row*g.Dim+i]) - mu) / math.Exp(ls)
			s += -0.5*z*z - ls - halfLog2Pi
		}
		dst[row] = float32(s)
	}
	return dst
}

// EntropyTo writes each row's entropy into dst.
func (g *DiagGaussian) EntropyTo(dst, out []float32) []float32 {
	b := g.rows("EntropyTo", out)
	if len(dst) != b {
		shapePanic("DiagGaussian.EntropyTo: len(dst)=%d, want %d rows", len(dst), b)
	}
	for row := 0; row < b; row++ {
		var s float64
		for i := 0; i < g.Dim; i++ {
			_, ls := g.meanLogStd(out, row, i)
			s += 0.5 + halfLog2Pi + ls
		}
		dst[row] = float32(s)
	}
	return dst
}

// Backward writes dL/dout into dOut (overwritten, returned) for a loss that
// depends on log π(actions) and H through dLogProb[r] and dEntropy[r]
// (either may be nil), with the actions held fixed (the likelihood-ratio
// gradient of PPO and A2C). A state-independent LogStd accumulates its
// gradient into LogStd.Grad.
//
//	dlog π/dμ_i = (a_i−μ_i)/σ_i²,  dlog π/dlog σ_i = ((a_i−μ_i)/σ_i)² − 1,  dH/dlog σ_i = 1
func (g *DiagGaussian) Backward(dOut, out, actions, dLogProb, dEntropy []float32) []float32 {
	b := g.rows("Backward", out)
	g.check("Backward", b, actions)
	if len(dOut) != len(out) || (dLogProb != nil && len(dLogProb) != b) || (dEntropy != nil && len(dEntropy) != b) {
		shapePanic("DiagGaussian.Backward: len(dOut)=%d len(dLogProb)=%d len(dEntropy)=%d for %d rows", len(dOut), len(dLogProb), len(dEntropy), b)
	}
	w := g.OutDim()
	for row := 0; row < b; row++ {
		var gl, ge float64
		if dLogProb != nil {
			gl = float64(dLogProb[row])
		}
		if dEntropy != nil {
			ge = float64(dEntropy[row])
		}
		for i := 0; i < g.Dim; i++ {
			mu, ls := g.meanLogStd(out, row, i)
			sd := math.Exp(ls)
			z := (float64(actions[row*g.Dim+i]) - mu) / sd
			dOut[row*w+i] = float32(gl * z / sd)
			dls := gl*(z*z-1) + ge
			if g.LogStd == nil {
				dOut[row*w+g.Dim+i] = float32(dls)
			} else {
				g.LogStd.Grad[i] += float32(dls)
			}
		}
	}
	return dOut
}

// BackwardSample writes dL/dout into dOut for a loss on a reparameterised
// sample a = μ + σ·ε (noise from SampleTo), given dAct = dL/da:
// dL/dμ = dAct, dL/dlog σ = dAct·σ·ε. A state-independent LogStd
// accumulates into LogStd.Grad.
func (g *DiagGaussian) BackwardSample(dOut, out, noise, dAct []float32) []float32 {
	b := g.rows("BackwardSample", out)
	g.check("BackwardSample", b, noise, dAct)
	if len(dOut) != len(out) {
		shapePanic("DiagGaussian.BackwardSample: len(dOut)=%d, want %d", len(dOut), len(out))
	}
	w := g.OutDim()
	for row := 0; row < b; row++ {
		for i := 0; i < g.Dim; i++ {
			_, ls := g.meanLogStd(out, row, i)
			da := float64(dAct[row*g.Dim+i])
			dOut[row*w+i] = float32(da)
			dls := da * math.Exp(ls) * float64(noise[row*g.Dim+i])
			if g.LogStd == nil {
				dOut[row*w+g.Dim+i] = float32(dls)
			} else {
				g.LogStd.Grad[i] += float32(dls)
			}
		}
	}
	return dOut
}

// TanhGaussian is SAC's squashed Gaussian policy (Haarnoja et al. 2018,
// appendix C; CleanRL sac_continuous_action.py). The network outputs 2·Dim
// values per row, [μ, raw], with
//
//	log σ = LogStdMin + ½(LogStdMax − LogStdMin)(tanh(raw) + 1)
//	u = μ + σ·ε,  a = tanh(u)·Scale + Bias
//	log π(a|s) = Σ_i −½ε_i² − log σ_i − ½log 2π − log(Scale_i(1 − tanh² u_i) + 1e-6)
type TanhGaussian struct {
	Dim                  int
	Scale, Bias          []float32 // (high−low)/2 and (high+low)/2 per dimension
	LogStdMin, LogStdMax float32   // −5 and 2, as in CleanRL
}

// NewTanhGaussian returns the head for actions in the box [low, high].
func NewTanhGaussian(low, high []float32) (*TanhGaussian, error) {
	scale, bias, err := boxScale("TanhGaussian", low, high)
	if err != nil {
		return nil, err
	}
	return &TanhGaussian{Dim: len(low), Scale: scale, Bias: bias, LogStdMin: -5, LogStdMax: 2}, nil
}

func boxScale(op string, low, high []float32) (scale, bias []float32, err error) {
	if len(low) == 0 || len(low) != len(high) {
		return nil, nil, fmt.Errorf("%w: %s: len(low)=%d len(high)=%d", ErrConfig, op, len(low), len(high))
	}
	scale = make([]float32, len(low))
	bias = make([]float32, len(low))
	for i := range low {
		if !(high[i] > low[i]) || isBad(low[i]) || isBad(high[i]) {
			return nil, nil, fmt.Errorf("%w: %s: bounds [%v, %v] at %d must be finite with high > low", ErrConfig, op, low[i], high[i], i)
		}
		scale[i] = (high[i] - low[i]) / 2
		bias[i] = (high[i] + low[i]) / 2
	}
	return scale, bias, nil
}

// OutDim is the network output width the head expects per row (2·Dim).
func (h *TanhGaussian) OutDim() int { return 2 * h.Dim }

func (h *TanhGaussian) rows(op string, out []float32, bufs ...[]float32) int {
	if len(out)%(2*h.Dim) != 0 {
		shapePanic("TanhGaussian.%s: len(out)=%d not a multiple of %d", op, len(out), 2*h.Dim)
	}
	b := len(out) / (2 * h.Dim)
	for _, s := range bufs {
		if s != nil && len(s) != b*h.Dim {
			shapePanic("TanhGaussian.%s: buffer of %d, want %d rows × %d", op, len(s), b, h.Dim)
		}
	}
	return b
}

func (h *TanhGaussian) logStd(raw float64) (ls, dlsdraw float64) {
	t := math.Tanh(raw)
	half := 0.5 * float64(h.LogStdMax-h.LogStdMin)
	return float64(h.LogStdMin) + half*(t+1), half * (1 - t*t)
}

// SampleTo draws ε ~ N(0, I) from r, writes the squashed action into
// dstAct, log π(a|s) per row into dstLogProb (may be nil) and ε into
// dstNoise (may be nil; BackwardSample needs it). It returns dstAct.
func (h *TanhGaussian) SampleTo(dstAct, dstLogProb, dstNoise, out []float32, r *rand.Rand) []float32 {
	b := h.rows("SampleTo", out, dstAct, dstNoise)
	if dstLogProb != nil && len(dstLogProb) != b {
		shapePanic("TanhGaussian.SampleTo: len(dstLogProb)=%d, want %d", len(dstLogProb), b)
	}
	d := h.Dim
	for row := 0; row < b; row++ {
		var lp float64
		for i := 0; i < d; i++ {
			mu := float64(out[row*2*d+i])
			ls, _ := h.logStd(float64(out[row*2*d+d+i]))
			e := r.NormFloat64()
			u := mu + math.Exp(ls)*e
			t := math.Tanh(u)
			s := float64(h.Scale[i])
			dstAct[row*d+i] = float32(t*s + float64(h.Bias[i]))
			if dstNoise != nil {
				dstNoise[row*d+i] = float32(e)
			}
			lp += -0.5*e*e - ls - halfLog2Pi - math.Log(s*(1-t*t)+1e-6)
		}
		if dstLogProb != nil {
			dstLogProb[row] = float32(lp)
		}
	}
	return dstAct
}

// ModeTo writes the deterministic action tanh(μ)·Scale + Bias into dst.
func (h *TanhGaussian) ModeTo(dst, out []float32) []float32 {
	b := h.rows("ModeTo", out, dst)
	d := h.Dim
	for row := 0; row < b; row++ {
		for i := 0; i < d; i++ {
			dst[row*d+i] = float32(math.Tanh(float64(out[row*2*d+i]))*float64(h.Scale[i]) + float64(h.Bias[i]))
		}
	}
	return dst
}

// BackwardSample writes dL/dout into dOut (overwritten, returned) for a
// loss on the reparameterised sample drawn by SampleTo with the same out
// and noise: dAct = dL/da (nil means zero) and dLogProb[r] = dL/dlog π_r
// (nil means zero). For SAC's actor loss α·log π − Q(s, a), pass
// dLogProb = α/B and dAct = −dQ/da /B.
func (h *TanhGaussian) BackwardSample(dOut, out, noise, dAct, dLogProb []float32) []float32 {
	b := h.rows("BackwardSample", out, noise, dAct)
	if len(dOut) != len(out) || (dLogProb != nil && len(dLogProb) != b) {
		shapePanic("TanhGaussian.BackwardSample: len(dOut)=%d len(dLogProb)=%d", len(dOut), len(dLogProb))
	}
	d := h.Dim
	for row := 0; row < b; row++ {
		var gl float64
		if dLogProb != nil {
			gl = float64(dLogProb[row])
		}
		for i := 0; i < d; i++ {
			mu := float64(out[row*2*d+i])
			ls, dls := h.logStd(float64(out[row*2*d+d+i]))
			sd := math.Exp(ls)
			e := float64(noise[row*d+i])
			t := math.Tanh(mu + sd*e)
			s := float64(h.Scale[i])
			var ga float64
			if dAct != nil {
				ga = float64(dAct[row*d+i])
			}
			q := s * (1 - t*t)
			// du: through a = tanh(u)·s + b and through the log-det term.
			du := ga*q + gl*2*s*t*(1-t*t)/(q+1e-6)
			dOut[row*2*d+i] = float32(du)
			dOut[row*2*d+d+i] = float32((du*sd*e - gl) * dls)
		}
	}
	return dOut
}

// TanhActor is the deterministic actor of DDPG and TD3: a = tanh(out)·Scale
// + Bias, one row of Dim outputs per batch element.
type TanhActor struct {
	Dim         int
	Scale, Bias []float32
}

// NewTanhActor returns the head for actions in the box [low, high].
func NewTanhActor(low, high []float32) (*TanhActor, error) {
	scale, bias, err := boxScale("TanhActor", low, high)
	if err != nil {
		return nil, err
	}
	return &TanhActor{Dim: len(low), Scale: scale, Bias: bias}, nil
}

func (h *TanhActor) check(op string, a, b []float32) {
	if len(a) != len(b) || len(a)%h.Dim != 0 {
		shapePanic("TanhActor.%s: lengths %d and %d, want equal multiples of %d", op, len(a), len(b), h.Dim)
	}
}

// ActionTo writes tanh(out)·Scale + Bias into dst and returns it.
func (h *TanhActor) ActionTo(dst, out []float32) []float32 {
	h.check("ActionTo", dst, out)
	for k, v := range out {
		i := k % h.Dim
		dst[k] = tanh32(v)*h.Scale[i] + h.Bias[i]
	}
	return dst
}

// Backward writes dL/dout = dAct·Scale·(1 − tanh²(out)) into dOut.
func (h *TanhActor) Backward(dOut, out, dAct []float32) []float32 {
	h.check("Backward", dOut, out)
	h.check("Backward", dAct, out)
	for k, v := range out {
		t := tanh32(v)
		dOut[k] = dAct[k] * h.Scale[k%h.Dim] * (1 - t*t)
	}
	return dOut
}
