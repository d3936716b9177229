package nn

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"herd/internal/scratch"
	"herd/nn/internal/kernel"
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
// position, the input value that kernel tap meets. Then Y = W·X̂ (+ b, per
// output channel), and the backward pass is dWᵀ = X̂·dYᵀ, db = Σ dY and
// dX̂ = Wᵀ·dY added back onto the image (col2im). On the native AVX2
// kernels (also on AVX-512 CPUs), a layer without padding, with more than 8
// output positions and taps and a multiple of 16 output channels keeps X̂
// transposed (patches, see conv_patches.go): its products run over the
// whole batch, the forward and dW products read the taps straight from
// the image, and dX̂ᵀ is made and added back a block of rows at a time.
// Other layers gather X̂ through a table of indices made once per layer (a
// stride-1 layer without padding copies each output row's taps as one
// run), with Y and dX̂ products per sample, straight from and into NCHW
// images, where that gives the whole-batch product's bits (perSample).
// Every layout sums each element in the same order, so all give the bits
// of the whole-batch formulation. The products run on the layer's Gemm
// (kernel.ConvGemm's larger tiles where that is the native one), in a
// fixed order, so results do not depend on GOMAXPROCS.
// Workspaces grow to the largest batch seen and are then reused: after one
// call at the largest batch, Forward and Backward allocate nothing.
//
// A Conv2d is not safe for concurrent use.
type Conv2d struct {
	cfg          Conv2dConfig
	weight, bias *Param
	gemm         Gemm
	taps         []int32 // tapIndex(cfg), shared by clones

	batch          int
	x              []float32 // the input, with patches
	cols           []float32 // X̂, (C·k·k) × (N·OH·OW), or a block of X̂ᵀ with patches
	wT             []float32 // Wᵀ, with patches
	tapOff, posOff []int     // see gathered
	yo             []float32 // W·X̂, out × (N·OH·OW), or its transpose with patches
	y              []float32 // output, NCHW
	dyo            []float32 // dY as out × (N·OH·OW)
	dyT            []float32 // its transpose, (N·OH·OW) × out
	dcols          []float32 // dX̂, as cols
	dwT            []float32 // dWᵀ of one Backward, (C·k·k) × out, or dW with patches
	dx             []float32 // dX, NCHW
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
		taps:   tapIndex(cfg),
	}
	bound := 1 / math.Sqrt(float64(fanIn))
	UniformInit(c.weight.Value, bound, r)
	UniformInit(c.bias.Value, bound, r)
	return c, nil
}

// withParams is the layer with weight w and bias b and fresh workspaces.
func (c *Conv2d) withParams(w, b *Param) *Conv2d {
	return &Conv2d{cfg: c.cfg, weight: w, bias: b, gemm: c.gemm, taps: c.taps}
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
func (c *Conv2d) Forward(x []float32, batch int) []float32 { return c.forward(x, batch, false) }

// perSample reports whether the layer's products run one sample at a
// time, writing and reading NCHW images in place: when an image has more
// than 8 output positions, where every element of the whole-batch product
// and of the per-sample one is the same chain of FMAs in the same order
// (see kernel.Gemm), so the two give the same bits. Narrower outputs keep
// the whole-batch product, whose columns then exceed 8.
func (c *Conv2d) perSample() bool { return c.cfg.OutH()*c.cfg.OutW() > 8 }

// patches reports whether the layer keeps X̂ transposed (see
// conv_patches.go): where the gather kernels apply (gatherable), perSample
// holds and there are more than 8 taps. Its products then run over the
// whole batch with the output channels (Yᵀ, dWᵀ) or the taps (dX̂ᵀ) as
// columns, more than 8 of them, so every element is the same chain of FMAs
// as in the other layouts and the bits do not change.
func (c *Conv2d) patches() bool {
	cfg := c.cfg
	return c.perSample() && cfg.InChannels*cfg.Kernel*cfg.Kernel > 8 && c.gatherable()
}

// forward is Forward, with relu: max(·, 0) applied to the output (the
// ReLU a ConvNet puts after each convolution).
func (c *Conv2d) forward(x []float32, batch int, relu bool) []float32 {
	if len(x) != batch*c.In() {
		shapePanic("nn: Conv2d.Forward: len(x) = %d, want batch %d × %d", len(x), batch, c.In())
	}
	cfg := c.cfg
	ckk := cfg.InChannels * cfg.Kernel * cfg.Kernel
	p := cfg.OutH() * cfg.OutW()
	np := batch * p
	o := cfg.OutChannels
	c.batch = batch
	c.y = scratch.Resize(c.y, batch*o*p)
	switch {
	case c.patches():
		// Yᵀ = X̂ᵀ·Wᵀ over the whole batch, X̂ᵀ read from the image, then
		// each sample's p×o block transposed into its NCHW image. The input
		// is kept for Backward, which reads X̂ again.
		c.x = scratch.Resize(c.x, len(x))
		copy(c.x, x)
		c.wT = scratch.Resize(c.wT, ckk*o)
		transposeTo(c.wT, c.weight.Value, o, ckk)
		c.yo = scratch.Resize(c.yo, np*o)
		c.offsets(batch)
		c.gathered(x, false, np, o, ckk, c.posOff, c.tapOff, c.wT, o, c.yo, o)
		for n := range batch {
			transposeTo(c.y[n*o*p:(n+1)*o*p], c.yo[n*p*o:(n+1)*p*o], p, o)
		}
	case c.perSample():
		// Y_n = W·X̂_n straight into sample n's NCHW image.
		c.cols = scratch.Resize(c.cols, ckk*np)
		im2col(c.cols, x, batch, cfg, c.taps)
		for n := range batch {
			c.gemm.Sgemm(false, false, o, p, ckk, 1, c.weight.Value, ckk, c.cols[n*p:], np, 0, c.y[n*o*p:], p)
		}
	default:
		c.cols = scratch.Resize(c.cols, ckk*np)
		im2col(c.cols, x, batch, cfg, c.taps)
		c.yo = scratch.Resize(c.yo, o*np)
		c.gemm.Sgemm(false, false, o, np, ckk, 1, c.weight.Value, ckk, c.cols, np, 0, c.yo, np)
		for k := range o {
			src := c.yo[k*np : (k+1)*np]
			for n := range batch {
				copy(c.y[(n*o+k)*p:(n*o+k+1)*p], src[n*p:(n+1)*p])
			}
		}
	}
	for n := range batch {
		for k, b := range c.bias.Value {
			kernel.AddBias(true, c.y[(n*o+k)*p:(n*o+k+1)*p], b, relu)
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
	c.dyT = scratch.Resize(c.dyT, np*o)
	c.dwT = scratch.Resize(c.dwT, ckk*o+o)
	// Rows n·p… of dYᵀ are sample n's o×p image transposed.
	for n := range batch {
		transposeTo(c.dyT[n*p*o:(n+1)*p*o], dy[n*o*p:(n+1)*o*p], o, p)
	}
	// db += Σ dY, each channel's values summed in (sample, position)
	// order. Over more than 8 channels the native kernels take it as
	// 1ᵀ·dYᵀ: they sum a column in row order, by FMAs with 1, exact as
	// plain adds.
	db, s := c.bias.Grad, c.dwT[ckk*o:][:o]
	if f, ok := c.gemm.(fusedGemm); ok && o > 8 {
		f.gemmFused(true, 1, o, np, one[:], 0, c.dyT, o, s, o, false, nil, false)
	} else {
		clear(s)
		for k := range o {
			for n := range batch {
				for _, v := range dy[(n*o+k)*p : (n*o+k+1)*p] {
					s[k] += v
				}
			}
		}
	}
	for k, v := range s {
		db[k] += v
	}
	// dWᵀ = X̂·dYᵀ, added to the [out][C·k·k] gradient. In the patch
	// layout X̂ is read from the image, gatherBlock positions at a time;
	// each block carries every element's sum on from where the last one
	// stored it, so each is still one chain over all N·OH·OW terms in
	// order.
	dw := c.weight.Grad
	if c.patches() {
		for r := 0; r < np; r += gatherBlock {
			m := min(gatherBlock, np-r)
			c.gathered(c.x, r > 0, ckk, o, m, c.tapOff, c.posOff[r:], c.dyT[r*o:], o, c.dwT, o)
		}
		for k := range o {
			row := dw[k*ckk : (k+1)*ckk]
			for j := range row {
				row[j] += c.dwT[j*o+k]
			}
		}
	} else {
		c.gemm.Sgemm(false, false, ckk, o, np, 1, c.cols, np, c.dyT, o, 0, c.dwT, o)
		for k := range o {
			row := dw[k*ckk : (k+1)*ckk]
			for j := range row {
				row[j] += c.dwT[j*o+k]
			}
		}
	}
	if !input {
		return nil
	}
	// dX̂ = Wᵀ·dY, added back onto the input.
	c.dx = scratch.Resize(c.dx, batch*c.In())
	switch {
	case c.patches() && ckk%16 == 0:
		// dX̂ᵀ = dYᵀ·W, a block of rows at a time, last block first (see
		// row2im).
		blk := patchBlock(ckk)
		c.dcols = scratch.Resize(c.dcols, blk*ckk)
		clear(c.dx)
		for r := (np - 1) / blk * blk; r >= 0; r -= blk {
			m := min(blk, np-r)
			c.product(false, m, ckk, o, c.dyT[r*o:], o, c.weight.Value, ckk, false, c.dcols, ckk)
			row2im(c.dx, c.dcols[:m*ckk], r, cfg)
		}
		return c.dx
	case c.perSample():
		c.dcols = scratch.Resize(c.dcols, ckk*np)
		for n := range batch {
			c.gemm.Sgemm(true, false, ckk, p, o, 1, c.weight.Value, ckk, dy[n*o*p:], p, 0, c.dcols[n*p:], np)
		}
	default:
		c.dcols = scratch.Resize(c.dcols, ckk*np)
		c.dyo = scratch.Resize(c.dyo, o*np)
		for k := range o {
			dst := c.dyo[k*np : (k+1)*np]
			for n := range batch {
				copy(dst[n*p:(n+1)*p], dy[(n*o+k)*p:(n*o+k+1)*p])
			}
		}
		c.gemm.Sgemm(true, false, ckk, np, o, 1, c.weight.Value, ckk, c.dyo, np, 0, c.dcols, np)
	}
	col2im(c.dx, c.dcols, batch, cfg, c.taps)
	return c.dx
}

// product is C = op(A)·B (+ C with acc) on the layer's Gemm, or in
// kernel.ConvGemm's larger tiles where the Gemm is the native one, with the
// same bits.
func (c *Conv2d) product(transA bool, m, n, k int, a []float32, lda int, b []float32, ldb int, acc bool, cc []float32, ldc int) {
	if g, ok := c.gemm.(native); ok && kernel.ConvGemm(g.asm, transA, m, n, k, a, lda, b, ldb, cc, ldc, acc) {
		return
	}
	var beta float32
	if acc {
		beta = 1
	}
	c.gemm.Sgemm(transA, false, m, n, k, 1, a, lda, b, ldb, beta, cc, ldc)
}

// gatherBlock is how many output positions one block of the gathered dWᵀ
// product sums over: their rows of dYᵀ and the image rows they read stay
// in L1 and L2.
const gatherBlock = 128

// gatherable reports whether the layer's products can read X̂ straight
// from the image (kernel.ConvGemmGather): the native AVX2 kernels, no
// padding, and a multiple of 16 output channels.
func (c *Conv2d) gatherable() bool {
	g, ok := c.gemm.(native)
	return ok && g.asm && kernel.Active() >= kernel.AVX2FMA && c.cfg.Padding == 0 && c.cfg.OutChannels%16 == 0
}

// offsets makes the tables gathered reads: tapOff, (c, di, dj) ↦
// (c·H + di)·W + dj, once, and posOff, (n, i, j) ↦ n·C·H·W + i·s·W + j·s,
// for this batch.
func (c *Conv2d) offsets(batch int) {
	cfg := c.cfg
	h, w, k, s := cfg.InH, cfg.InW, cfg.Kernel, cfg.stride()
	if c.tapOff == nil {
		for ch := range cfg.InChannels {
			for di := range k {
				for dj := range k {
					c.tapOff = append(c.tapOff, (ch*h+di)*w+dj)
				}
			}
		}
	}
	if len(c.posOff) == batch*cfg.OutH()*cfg.OutW() {
		return
	}
	c.posOff = c.posOff[:0]
	for n := range batch {
		for i := range cfg.OutH() {
			for j := range cfg.OutW() {
				c.posOff = append(c.posOff, n*c.In()+i*s*w+j*s)
			}
		}
	}
}

// gathered runs kernel.ConvGemmGather, which takes every layer that
// gatherable accepts (offsets made).
func (c *Conv2d) gathered(src []float32, acc bool, m, n, k int, rows, offs []int, b []float32, ldb int, cc []float32, ldc int) {
	if !kernel.ConvGemmGather(true, m, n, k, src, rows, offs, b, ldb, cc, ldc, acc) {
		panic("nn: Conv2d: the gather kernel declined a layer that gatherable accepts")
	}
}

// one is the 1×1 matrix of ones whose row, read with stride 0, sums the
// rows of a product's B.
var one = [1]float32{1}

// tapIndex returns, for every row (c, di, dj) of X̂ and output position
// (i, j) of one sample, the input value that kernel tap reads, as an index
// into the sample's C·H·W values, or −1 where it falls on the padding.
// im2col and col2im walk this table instead of the geometry, so an image
// of a few pixels costs one load per entry, not a call per output row.
func tapIndex(cfg Conv2dConfig) []int32 {
	C, h, w, k, s, pad := cfg.InChannels, cfg.InH, cfg.InW, cfg.Kernel, cfg.stride(), cfg.Padding
	oh, ow := cfg.OutH(), cfg.OutW()
	idx := make([]int32, 0, C*k*k*oh*ow)
	for c := range C {
		for di := range k {
			for dj := range k {
				for i := range oh {
					for j := range ow {
						y, x := i*s-pad+di, j*s-pad+dj
						if y < 0 || y >= h || x < 0 || x >= w {
							idx = append(idx, -1)
						} else {
							idx = append(idx, int32((c*h+y)*w+x))
						}
					}
				}
			}
		}
	}
	return idx
}

// im2col writes X̂: row r holds, for every sample n and output position q,
// x[n, taps[r·p+q]], or 0 on the padding. A stride-1 convolution without
// padding reads each output row's taps as consecutive input values, so
// it copies them row by row instead of walking the table.
func im2col(cols, x []float32, batch int, cfg Conv2dConfig, taps []int32) {
	in := cfg.InChannels * cfg.InH * cfg.InW
	oh, ow := cfg.OutH(), cfg.OutW()
	p := oh * ow
	np := batch * p
	if cfg.stride() == 1 && cfg.Padding == 0 {
		h, w, k := cfg.InH, cfg.InW, cfg.Kernel
		for r := range len(taps) / p {
			c, di, dj := r/(k*k), r/k%k, r%k
			from := (c*h+di)*w + dj
			for n := range batch {
				kernel.CopyRows(cols[r*np+n*p:][:p], x[n*in+from:], oh, ow, w)
			}
		}
		return
	}
	for r := range len(taps) / p {
		row := taps[r*p:][:p]
		for n := range batch {
			dst, src := cols[r*np+n*p:][:p], x[n*in:][:in]
			for q, ix := range row {
				if ix < 0 {
					dst[q] = 0
				} else {
					dst[q] = src[ix]
				}
			}
		}
	}
}

// col2im is im2col's adjoint: it adds every entry of dX̂ back onto the
// input position it was read from (overlapping taps add up, in X̂'s row
// order) and drops the padding.
func col2im(dx, dcols []float32, batch int, cfg Conv2dConfig, taps []int32) {
	in := cfg.InChannels * cfg.InH * cfg.InW
	p := cfg.OutH() * cfg.OutW()
	np := batch * p
	clear(dx[:batch*in])
	for r := range len(taps) / p {
		row := taps[r*p:][:p]
		for n := range batch {
			src, dst := dcols[r*np+n*p:][:p], dx[n*in:][:in]
			for q, ix := range row {
				if ix >= 0 {
					dst[ix] += src[q]
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
