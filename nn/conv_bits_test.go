package nn

import (
	"math"
	"testing"

	"herd/internal/rng"
)

// wholeBatchConv is the convolution as one product over the whole batch:
// X̂ gathered through the tap table, Y = W·X̂ into out × (N·OH·OW), then
// permuted to NCHW with the bias added (and max(·, 0) with relu); the
// backward pass dWᵀ = X̂·dYᵀ, db = Σ dY, dX̂ = Wᵀ·dY and col2im, each in
// whole-batch layout. Conv2d must give its bits.
func wholeBatchConv(g Gemm, cfg Conv2dConfig, w, b, x, dy []float32, batch int, relu bool) (y, dw, db, dx []float32) {
	ckk := cfg.InChannels * cfg.Kernel * cfg.Kernel
	p, o := cfg.OutH()*cfg.OutW(), cfg.OutChannels
	np := batch * p
	taps := tapIndex(cfg)
	cols := make([]float32, ckk*np)
	for r := range ckk {
		for n := range batch {
			for q := range p {
				if ix := taps[r*p+q]; ix >= 0 {
					cols[r*np+n*p+q] = x[n*cfg.InChannels*cfg.InH*cfg.InW+int(ix)]
				}
			}
		}
	}
	yo := make([]float32, o*np)
	g.Sgemm(false, false, o, np, ckk, 1, w, ckk, cols, np, 0, yo, np)
	y = make([]float32, batch*o*p)
	for k := range o {
		for n := range batch {
			for q := range p {
				v := yo[k*np+n*p+q] + b[k]
				if relu {
					v = max(v, 0)
				}
				y[(n*o+k)*p+q] = v
			}
		}
	}
	dyo := make([]float32, o*np)
	db = make([]float32, o)
	for k := range o {
		var s float32
		for n := range batch {
			for q := range p {
				v := dy[(n*o+k)*p+q]
				dyo[k*np+n*p+q] = v
				s += v
			}
		}
		db[k] = s
	}
	dyT := make([]float32, np*o)
	transposeTo(dyT, dyo, o, np)
	dwT := make([]float32, ckk*o)
	g.Sgemm(false, false, ckk, o, np, 1, cols, np, dyT, o, 0, dwT, o)
	dw = make([]float32, o*ckk)
	for k := range o {
		for j := range ckk {
			dw[k*ckk+j] = dwT[j*o+k]
		}
	}
	dcols := make([]float32, ckk*np)
	g.Sgemm(true, false, ckk, np, o, 1, w, ckk, dyo, np, 0, dcols, np)
	dx = make([]float32, batch*cfg.InChannels*cfg.InH*cfg.InW)
	col2im(dx, dcols, batch, cfg, taps)
	return y, dw, db, dx
}

// TestConv2dSameBitsAsWholeBatch: the per-sample products, the tap runs
// and the fused bias and ReLU give the whole-batch formulation's bits on
// every backend this build has, at batch 1 and 32, for stride-1 and
// strided layers with and without padding, wide and narrow (≤ 8
// positions) outputs.
func TestConv2dSameBitsAsWholeBatch(t *testing.T) {
	cfgs := append([]Conv2dConfig{minatarConv,
		{InChannels: 3, InH: 5, InW: 5, OutChannels: 16, Kernel: 3, Padding: 1},
		{InChannels: 16, InH: 2, InW: 2, OutChannels: 32, Kernel: 3, Padding: 1},
		{InChannels: 2, InH: 12, InW: 11, OutChannels: 5, Kernel: 4, Stride: 2, Padding: 1},
		{InChannels: 2, InH: 12, InW: 11, OutChannels: 16, Kernel: 4, Stride: 2, Padding: 1},
		{InChannels: 3, InH: 13, InW: 13, OutChannels: 12, Kernel: 8, Stride: 4, Padding: 2},
		{InChannels: 4, InH: 10, InW: 10, OutChannels: 9, Kernel: 1}}, natureConvs...)
	for _, g := range []Gemm{DefaultGemm(), PortableGemm()} {
		for ci, cfg := range cfgs {
			for _, batch := range []int{1, 32} {
				for _, relu := range []bool{false, true} {
					cv, err := NewConv2d("", cfg, g, rng.New(1, "conv-bits", ci))
					if err != nil {
						t.Fatal(err)
					}
					r := rng.New(2, "conv-bits", ci)
					x, dy := randn(r, batch*cv.In(), 1), randn(r, batch*cv.Out(), 1)
					wy, wdw, wdb, wdx := wholeBatchConv(g, cfg, cv.weight.Value, cv.bias.Value, x, dy, batch, relu)
					y := cv.forward(x, batch, relu)
					dx := cv.Backward(dy)
					for _, c := range []struct {
						name      string
						got, want []float32
					}{{"y", y, wy}, {"dW", cv.weight.Grad, wdw}, {"db", cv.bias.Grad, wdb}, {"dx", dx, wdx}} {
						for i := range c.want {
							if math.Float32bits(c.got[i]) != math.Float32bits(c.want[i]) {
								t.Fatalf("%s, conv %d %+v, batch %d, relu %v: %s[%d] = %v, whole batch %v",
									g.Name(), ci, cfg, batch, relu, c.name, i, c.got[i], c.want[i])
							}
						}
					}
				}
			}
		}
	}
}
