package nn

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
)

// Conv2dConfig describes a 2-D convolution over NCHW images, as PyTorch's
// nn.Conv2d(in, out, kernel, stride, padding) with square kernels, zero
// padding and a bias.
type Conv2dConfig struct {
	// InChannels, InH and InW are the input image's shape (C, H, W).
	InChannels, InH, InW int
	// OutChannels is the number of filters.
	OutChannels int
	// Kernel is the side of the square kernel; Stride (default 1) and
	// Padding (zeros on every side, default 0) as in PyTorch.
	Kernel, Stride, Padding int
}

func (c Conv2dConfig) stride() int {
	if c.Stride == 0 {
		return 1
	}
	return c.Stride
}

// OutH is the output height: ⌊(H + 2·padding − kernel) / stride⌋ + 1.
func (c Conv2dConfig) OutH() int { return (c.InH+2*c.Padding-c.Kernel)/c.stride() + 1 }

// OutW is the output width, as OutH.
func (c Conv2dConfig) OutW() int { return (c.InW+2*c.Padding-c.Kernel)/c.stride() + 1 }

// Validate reports every problem with the configuration, each wrapping
// ErrConfig.
func (c Conv2dConfig) Validate() error {
	var errs []error
	for _, f := range []struct {
		name string
		v    int
	}{{"InChannels", c.InChannels}, {"InH", c.InH}, {"InW", c.InW}, {"OutChannels", c.OutChannels}, {"Kernel", c.Kernel}} {
		if f.v <= 0 {
			errs = append(errs, fmt.Errorf("%w: Conv2d %s = %d, want > 0", ErrConfig, f.name, f.v))
		}
	}
	if c.Stride < 0 {
		errs = append(errs, fmt.Errorf("%w: Conv2d Stride = %d, want ≥ 0 (0 means 1)", ErrConfig, c.Stride))
	}
	if c.Padding < 0 {
		errs = append(errs, fmt.Errorf("%w: Conv2d Padding = %d, want ≥ 0", ErrConfig, c.Padding))
	}
	if len(errs) == 0 && (c.OutH() <= 0 || c.OutW() <= 0) {
		errs = append(errs, fmt.Errorf("%w: Conv2d kernel %d with padding %d does not fit a %d×%d image", ErrConfig, c.Kernel, c.Padding, c.InH, c.InW))
	}
	return errors.Join(errs...)
}

// Conv2d is a 2-D convolution layer with PyTorch's parameters and layout:
// weight [out, in, k, k] and bias [out], named prefix+"weight" and
// prefix+"bias", images flat in NCHW order (sample, channel, row,
// column), so a flattened output feeds a Linear exactly as
// torch.flatten(x, 1) does.
//
// The convolution is an im2col product. Row (c, di, dj) of the column
// matrix X̂ ((C·k·k) × (N·OH·OW)) holds, for every sample and output
// position, the input value that kernel tap meets — for stride 1 a shifted
// copy of the image, written in runs of OW. Then Y = W·X̂ (+ b, per output
// channel), and the backward pass is dWᵀ = X̂·dYᵀ, db = Σ dY and
// dX̂ = Wᵀ·dY added back onto the image (col2im). The three products run on
// the layer's Gemm, in a fixed order, so results do not depend on
// GOMAXPROCS. Workspaces grow to the largest batch seen and are then
// reused: after one call at the largest batch, Forward and Backward
// allocate nothing.
//
// A Conv2d is not safe for concurrent use.
type Conv2d struct {
	cfg          Conv2dConfig
	weight, bias *Param
	gemm         Gemm

	batch int
	cols  []float32 // X̂, (C·k·k) × (N·OH·OW)
	yo    []float32 // W·X̂, out × (N·OH·OW)
	y     []float32 // output, NCHW
	dyo   []float32 // dY as out × (N·OH·OW)
	dyT   []float32 // its transpose, (N·OH·OW) × out
	dcols []float32 // dX̂, as cols
	dwT   []float32 // dWᵀ of one Backward, (C·k·k) × out
	dx    []float32 // dX, NCHW
}

// NewConv2d builds a convolution with PyTorch's default initialisation
// (weights and bias uniform in ±1/√(C·k·k)), drawn from r, parameters named
// prefix+"weight" and prefix+"bias" (e.g. "encoder.0."). A nil g means
// DefaultGemm.
func NewConv2d(prefix string, cfg Conv2dConfig, g Gemm, r *rand.Rand) (*Conv2d, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if g == nil {
		g = DefaultGemm()
	}
	fanIn := cfg.InChannels * cfg.Kernel * cfg.Kernel
	c := &Conv2d{
		cfg:    cfg,
		weight: NewParam(prefix+"weight", cfg.OutChannels, cfg.InChannels, cfg.Kernel, cfg.Kernel),
		bias:   NewParam(prefix+"bias", cfg.OutChannels),
		gemm:   g,
	}
	bound := 1 / math.Sqrt(float64(fanIn))
	UniformInit(c.weight.Value, bound, r)
	UniformInit(c.bias.Value, bound, r)
	return c, nil
}

// Config returns the layer's configuration.
func (c *Conv2d) Config() Conv2dConfig { return c.cfg }

// Params returns the weight and the bias, in that order.
func (c *Conv2d) Params() []*Param { return []*Param{c.weight, c.bias} }

// In is the number of input values per sample, C·H·W.
func (c *Conv2d) In() int { return c.cfg.InChannels * c.cfg.InH * c.cfg.InW }

// Out is the number of output values per sample, out·OH·OW.
func (c *Conv2d) Out() int { return c.cfg.OutChannels * c.cfg.OutH() * c.cfg.OutW() }

// Forward computes the convolution of batch images x (NCHW, batch·In()
// values) and returns the output (NCHW, batch·Out() values), valid until
// the next Forward.
func (c *Conv2d) Forward(x []float32, batch int) []float32 {
	if len(x) != batch*c.In() {
		shapePanic("nn: Conv2d.Forward: len(x) = %d, want batch %d × %d", len(x), batch, c.In())
	}
	cfg := c.cfg
	ckk := cfg.InChannels * cfg.Kernel * cfg.Kernel
	p := cfg.OutH() * cfg.OutW()
	np := batch * p
	o := cfg.OutChannels
	c.batch = batch
	c.cols = grow(c.cols, ckk*np)
	c.yo = grow(c.yo, o*np)
	c.y = grow(c.y, batch*o*p)
	im2col(c.cols, x, batch, cfg)
	c.gemm.Sgemm(false, false, o, np, ckk, 1, c.weight.Value, ckk, c.cols, np, 0, c.yo, np)
	for k, b := range c.bias.Value {
		src := c.yo[k*np : (k+1)*np]
		for n := range batch {
			dst := c.y[(n*o+k)*p : (n*o+k+1)*p]
			for q, v := range src[n*p : (n+1)*p] {
				dst[q] = v + b
			}
		}
	}
	return c.y
}

// Backward takes dL/dY for the last Forward's output (NCHW), adds dL/dW
// and dL/db to the parameters' Grad and returns dL/dX (NCHW), valid until
// the next Backward.
func (c *Conv2d) Backward(dy []float32) []float32 { return c.backward(dy, true) }

// backward is Backward, returning dL/dX only when input is set: a first
// layer's input is the observation, whose gradient nobody reads.
func (c *Conv2d) backward(dy []float32, input bool) []float32 {
	cfg := c.cfg
	ckk := cfg.InChannels * cfg.Kernel * cfg.Kernel
	p := cfg.OutH() * cfg.OutW()
	o := cfg.OutChannels
	batch := c.batch
	np := batch * p
	if len(dy) != batch*o*p {
		shapePanic("nn: Conv2d.Backward: len(dy) = %d, want %d", len(dy), batch*o*p)
	}
	c.dyo = grow(c.dyo, o*np)
	c.dyT = grow(c.dyT, np*o)
	c.dwT = grow(c.dwT, ckk*o)
	db := c.bias.Grad
	for k := range o {
		dst := c.dyo[k*np : (k+1)*np]
		var s float32
		for n := range batch {
			src := dy[(n*o+k)*p : (n*o+k+1)*p]
			copy(dst[n*p:(n+1)*p], src)
			for _, v := range src {
				s += v
			}
		}
		db[k] += s
	}
	// dWᵀ = X̂·dYᵀ, added to the [out][C·k·k] gradient.
	transposeTo(c.dyT, c.dyo, o, np)
	c.gemm.Sgemm(false, false, ckk, o, np, 1, c.cols, np, c.dyT, o, 0, c.dwT, o)
	dw := c.weight.Grad
	for k := range o {
		row := dw[k*ckk : (k+1)*ckk]
		for j := range row {
			row[j] += c.dwT[j*o+k]
		}
	}
	if !input {
		return nil
	}
	// dX̂ = Wᵀ·dY, added back onto the input.
	c.dcols = grow(c.dcols, ckk*np)
	c.dx = grow(c.dx, batch*c.In())
	c.gemm.Sgemm(true, false, ckk, np, o, 1, c.weight.Value, ckk, c.dyo, np, 0, c.dcols, np)
	col2im(c.dx, c.dcols, batch, cfg)
	return c.dx
}

// im2col writes row (c, di, dj) of X̂: for every sample n and output
// position (i, j), x[n, c, i·s−pad+di, j·s−pad+dj], or 0 on the padding.
func im2col(cols, x []float32, batch int, cfg Conv2dConfig) {
	forTaps(batch, cfg, func(dst []float32, src []float32, x0, s int) {
		ow := len(dst)
		if s == 1 && x0 >= 0 && x0+ow <= len(src) {
			copy(dst, src[x0:x0+ow])
			return
		}
		for j := range dst {
			if xx := x0 + j*s; xx >= 0 && xx < len(src) {
				dst[j] = src[xx]
			} else {
				dst[j] = 0
			}
		}
	}, cols, x, true)
}

// col2im is im2col's adjoint: it adds every entry of dX̂ back onto the
// input position it was read from (overlapping taps add up) and drops the
// padding.
func col2im(dx, dcols []float32, batch int, cfg Conv2dConfig) {
	clear(dx[:batch*cfg.InChannels*cfg.InH*cfg.InW])
	forTaps(batch, cfg, func(src []float32, dst []float32, x0, s int) {
		ow := len(src)
		if s == 1 && x0 >= 0 && x0+ow <= len(dst) {
			d := dst[x0 : x0+ow]
			for j, v := range src {
				d[j] += v
			}
			return
		}
		for j, v := range src {
			if xx := x0 + j*s; xx >= 0 && xx < len(dst) {
				dst[xx] += v
			}
		}
	}, dcols, dx, false)
}

// forTaps walks X̂ row by row and, for every sample and output row i whose
// input row y = i·s−pad+di lies inside the image, calls run with the OW
// entries of X̂ for that row and the input row y (x0 = −pad+dj is where
// output column 0 reads); output rows that fall on the padding are zeroed
// in X̂ when zero is set.
func forTaps(batch int, cfg Conv2dConfig, run func(cols, img []float32, x0, s int), cols, img []float32, zero bool) {
	C, h, w, k, s, pad := cfg.InChannels, cfg.InH, cfg.InW, cfg.Kernel, cfg.stride(), cfg.Padding
	oh, ow := cfg.OutH(), cfg.OutW()
	p := oh * ow
	np := batch * p
	for c := range C {
		for di := range k {
			for dj := range k {
				row := cols[((c*k+di)*k+dj)*np:][:np]
				for n := range batch {
					plane := img[(n*C+c)*h*w:][:h*w]
					for i := range oh {
						seg := row[n*p+i*ow:][:ow]
						y := i*s - pad + di
						if y < 0 || y >= h {
							if zero {
								clear(seg)
							}
							continue
						}
						run(seg, plane[y*w:(y+1)*w], dj-pad, s)
					}
				}
			}
		}
	}
}

// ConvPreset returns the convolutions of a named encoder for c×h×w
// images, ReLU between and after them in the networks that use them:
//   - "minatar": MinAtar's DQN network (Young and Tian 2019), one 16-filter
//     3×3 convolution of stride 1 (for 10×10×C frames);
//   - "nature": Nature DQN (Mnih et al. 2015), 32 8×8 of stride 4, 64 4×4 of
//     stride 2, 64 3×3 of stride 1 (for 84×84×4 frames).
func ConvPreset(name string, c, h, w int) ([]Conv2dConfig, error) {
	var layers [][3]int // out, kernel, stride
	switch name {
	case "minatar":
		layers = [][3]int{{16, 3, 1}}
	case "nature":
		layers = [][3]int{{32, 8, 4}, {64, 4, 2}, {64, 3, 1}}
	default:
		return nil, fmt.Errorf("%w: unknown conv preset %q (want minatar or nature)", ErrConfig, name)
	}
	var cfgs []Conv2dConfig
	for _, l := range layers {
		cfg := Conv2dConfig{InChannels: c, InH: h, InW: w, OutChannels: l[0], Kernel: l[1], Stride: l[2]}
		if err := cfg.Validate(); err != nil {
			return nil, fmt.Errorf("conv preset %s on %d×%d×%d images: %w", name, c, h, w, err)
		}
		cfgs = append(cfgs, cfg)
		c, h, w = cfg.OutChannels, cfg.OutH(), cfg.OutW()
	}
	return cfgs, nil
}
