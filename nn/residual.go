package nn

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"herd/internal/scratch"
)

// ResidualStage is one stage of IMPALA's residual encoder (Espeholt et al.
// 2018, Figure 3, the "large" network; CleanRL's ConvSequence): a 3×3
// convolution (padding 1) to Channels, a 3×3 max pool of stride 2
// (padding 1), then two residual blocks, each x + conv1(relu(conv0(relu(x))))
// with 3×3 convolutions of Channels filters (padding 1). The input image is
// InChannels × InH × InW; the output is Channels × ⌈InH/2⌉ × ⌈InW/2⌉.
type ResidualStage struct {
	InChannels, InH, InW int
	Channels             int
}

// OutH is the stage's output height, the pool's: ⌊(H + 2 − 3)/2⌋ + 1.
func (s ResidualStage) OutH() int { return (s.InH-1)/2 + 1 }

// OutW is the stage's output width, as OutH.
func (s ResidualStage) OutW() int { return (s.InW-1)/2 + 1 }

func (s ResidualStage) conv() Conv2dConfig {
	return Conv2dConfig{InChannels: s.InChannels, InH: s.InH, InW: s.InW, OutChannels: s.Channels, Kernel: 3, Padding: 1}
}

func (s ResidualStage) block() Conv2dConfig {
	return Conv2dConfig{InChannels: s.Channels, InH: s.OutH(), InW: s.OutW(), OutChannels: s.Channels, Kernel: 3, Padding: 1}
}

// Validate reports every problem with the stage, each wrapping ErrConfig.
func (s ResidualStage) Validate() error {
	var errs []error
	if s.Channels <= 0 {
		errs = append(errs, fmt.Errorf("%w: ResidualStage Channels = %d, want > 0", ErrConfig, s.Channels))
	}
	if err := s.conv().Validate(); err != nil && s.Channels > 0 {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// ImpalaStages returns IMPALA's residual encoder for c×h×w images: stages
// of 16, 32 and 32 channels, as the paper's large network and CleanRL's
// Procgen and Atari IMPALA-CNN scripts use.
func ImpalaStages(c, h, w int) ([]ResidualStage, error) {
	var stages []ResidualStage
	for _, ch := range []int{16, 32, 32} {
		s := ResidualStage{InChannels: c, InH: h, InW: w, Channels: ch}
		if err := s.Validate(); err != nil {
			return nil, fmt.Errorf("impala encoder on %d×%d×%d images: %w", c, h, w, err)
		}
		stages = append(stages, s)
		c, h, w = ch, s.OutH(), s.OutW()
	}
	return stages, nil
}

// stageLayer is a ResidualStage as an encoder layer: a convolution, the
// pool and two residual blocks.
type stageLayer struct {
	cfg    ResidualStage
	conv   *Conv2d
	pool   maxPool
	blocks [2]resBlock
}

func newStageLayer(prefix string, cfg ResidualStage, g Gemm, r *rand.Rand) (*stageLayer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	conv, err := NewConv2d(prefix+"conv.", cfg.conv(), g, r)
	if err != nil {
		return nil, err
	}
	s := &stageLayer{cfg: cfg, conv: conv, pool: maxPool{c: cfg.Channels, h: cfg.InH, w: cfg.InW}}
	for i := range s.blocks {
		for j := range 2 {
			cv, err := NewConv2d(fmt.Sprintf("%sres_block%d.conv%d.", prefix, i, j), cfg.block(), g, r)
			if err != nil {
				return nil, err
			}
			s.blocks[i].convs[j] = cv
		}
	}
	return s, nil
}

func (s *stageLayer) in() int  { return s.cfg.InChannels * s.cfg.InH * s.cfg.InW }
func (s *stageLayer) out() int { return s.cfg.Channels * s.cfg.OutH() * s.cfg.OutW() }

func (s *stageLayer) params() []*Param {
	ps := s.conv.Params()
	for i := range s.blocks {
		for _, cv := range s.blocks[i].convs {
			ps = append(ps, cv.Params()...)
		}
	}
	return ps
}

func (s *stageLayer) forward(x []float32, batch int) []float32 {
	y := s.pool.forward(s.conv.Forward(x, batch), batch)
	for i := range s.blocks {
		y = s.blocks[i].forward(y, batch)
	}
	return y
}

func (s *stageLayer) backward(dy []float32, input bool) []float32 {
	for i := len(s.blocks) - 1; i >= 0; i-- {
		dy = s.blocks[i].backward(dy)
	}
	return s.conv.backward(s.pool.backward(dy), input)
}

func (s *stageLayer) clone(ps []*Param) encLayer {
	c := &stageLayer{cfg: s.cfg, conv: s.conv.withParams(ps[0], ps[1]), pool: maxPool{c: s.pool.c, h: s.pool.h, w: s.pool.w}}
	k := 2
	for i := range s.blocks {
		for j, cv := range s.blocks[i].convs {
			c.blocks[i].convs[j] = cv.withParams(ps[k], ps[k+1])
			k += 2
		}
	}
	return c
}

// resBlock is y = x + conv1(relu(conv0(relu(x)))), with the activations
// its backward pass needs.
type resBlock struct {
	convs [2]*Conv2d
	a, c  []float32 // relu(x), relu(conv0(a))
	y     []float32
	da    []float32 // dL/d(conv0 output), then dL/dx
	dx    []float32
}

func (b *resBlock) forward(x []float32, batch int) []float32 {
	b.a = scratch.Resize(b.a, len(x))
	copy(b.a, x)
	ReLU.applyInPlace(b.a)
	h := b.convs[0].Forward(b.a, batch)
	b.c = scratch.Resize(b.c, len(h))
	copy(b.c, h)
	ReLU.applyInPlace(b.c)
	d := b.convs[1].Forward(b.c, batch)
	b.y = scratch.Resize(b.y, len(x))
	for i, v := range x {
		b.y[i] = v + d[i]
	}
	return b.y
}

func (b *resBlock) backward(dy []float32) []float32 {
	dc := b.convs[1].Backward(dy)
	b.da = scratch.Resize(b.da, len(dc))
	ReLU.backward(b.da, dc, b.c)
	da := b.convs[0].Backward(b.da)
	b.dx = scratch.Resize(b.dx, len(dy))
	ReLU.backward(b.dx, da, b.a)
	for i, g := range dy {
		b.dx[i] += g
	}
	return b.dx
}

// maxPool is PyTorch's MaxPool2d(3, stride=2, padding=1) over c planes of
// h×w: padding never wins, and of equal values the first in the window's
// row-major order does, as PyTorch's CPU kernel picks (a NaN wins, so it
// propagates).
type maxPool struct {
	c, h, w int
	arg     []int32 // per output, the input index within its plane
	y, dx   []float32
}

func (p *maxPool) outHW() (int, int) { return (p.h-1)/2 + 1, (p.w-1)/2 + 1 }

func (p *maxPool) forward(x []float32, batch int) []float32 {
	oh, ow := p.outHW()
	planes := batch * p.c
	p.y = scratch.Resize(p.y, planes*oh*ow)
	if cap(p.arg) < planes*oh*ow {
		p.arg = make([]int32, planes*oh*ow)
	}
	p.arg = p.arg[:planes*oh*ow]
	for pl := range planes {
		src := x[pl*p.h*p.w:][:p.h*p.w]
		dst, arg := p.y[pl*oh*ow:][:oh*ow], p.arg[pl*oh*ow:][:oh*ow]
		for i := range oh {
			for j := range ow {
				best, at := float32(math.Inf(-1)), int32(-1)
				for yy := max(2*i-1, 0); yy <= min(2*i+1, p.h-1); yy++ {
					for xx := max(2*j-1, 0); xx <= min(2*j+1, p.w-1); xx++ {
						if v := src[yy*p.w+xx]; v > best || at < 0 || v != v {
							best, at = v, int32(yy*p.w+xx)
						}
					}
				}
				dst[i*ow+j], arg[i*ow+j] = best, at
			}
		}
	}
	return p.y
}

func (p *maxPool) backward(dy []float32) []float32 {
	oh, ow := p.outHW()
	planes := len(p.arg) / (oh * ow)
	p.dx = scratch.Resize(p.dx, planes*p.h*p.w)
	clear(p.dx)
	for pl := range planes {
		dst := p.dx[pl*p.h*p.w:][:p.h*p.w]
		for q, at := range p.arg[pl*oh*ow:][:oh*ow] {
			dst[at] += dy[pl*oh*ow+q]
		}
	}
	return p.dx
}
