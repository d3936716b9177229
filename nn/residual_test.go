package nn

import (
	"errors"
	"math"
	"testing"

	"herd/internal/rng"
)

// stage64 is a ResidualStage in float64, written from its definition:
// conv, 3×3 max pool of stride 2 with padding 1, two blocks
// x + conv1(relu(conv0(relu(x)))). ps holds the stage's parameters in
// module order (conv, res_block0.conv0, res_block0.conv1, …).
func stage64(st ResidualStage, batch int, x []float64, ps [][]float64) []float64 {
	relu := func(v []float64) []float64 {
		o := make([]float64, len(v))
		for i, a := range v {
			o[i] = math.Max(a, 0)
		}
		return o
	}
	y := conv64(st.conv(), batch, x, ps[0], ps[1])
	h, w, oh, ow := st.InH, st.InW, st.OutH(), st.OutW()
	pooled := make([]float64, batch*st.Channels*oh*ow)
	for pl := range batch * st.Channels {
		for i := range oh {
			for j := range ow {
				m := math.Inf(-1)
				for yy := 2*i - 1; yy <= 2*i+1; yy++ {
					for xx := 2*j - 1; xx <= 2*j+1; xx++ {
						if yy >= 0 && yy < h && xx >= 0 && xx < w {
							m = math.Max(m, y[pl*h*w+yy*w+xx])
						}
					}
				}
				pooled[pl*oh*ow+i*ow+j] = m
			}
		}
	}
	out := pooled
	for b := range 2 {
		c0 := conv64(st.block(), batch, relu(out), ps[2+4*b], ps[3+4*b])
		c1 := conv64(st.block(), batch, relu(c0), ps[4+4*b], ps[5+4*b])
		next := make([]float64, len(out))
		for i := range out {
			next[i] = out[i] + c1[i]
		}
		out = next
	}
	return out
}

// TestResidualStageGradients checks a residual stage's output, dX and
// every parameter's gradient against central differences of stage64, for
// L = Σ y·g, on an even and an odd image size, every Gemm backend.
func TestResidualStageGradients(t *testing.T) {
	for ci, st := range []ResidualStage{
		{InChannels: 2, InH: 4, InW: 4, Channels: 3},
		{InChannels: 1, InH: 5, InW: 3, Channels: 2},
	} {
		for _, gm := range []Gemm{DefaultGemm(), PortableGemm()} {
			r := rng.New(7, "stage-grad", ci)
			s, err := newStageLayer("s.", st, gm, r)
			if err != nil {
				t.Fatal(err)
			}
			const batch = 2
			x := make([]float32, batch*s.in())
			UniformInit(x, 1, r)
			gOut := make([]float32, batch*s.out())
			UniformInit(gOut, 1, r)
			y := s.forward(x, batch)
			x64, g64 := to64(x), to64(gOut)
			var ps64 [][]float64
			for _, p := range s.params() {
				ps64 = append(ps64, to64(p.Value))
			}
			if e := relErr(y, stage64(st, batch, x64, ps64)); e > 1e-6 {
				t.Fatalf("case %d %s: forward relative error %.2e", ci, gm.Name(), e)
			}
			dx := s.backward(gOut, true)
			loss := func() float64 {
				var l float64
				for i, v := range stage64(st, batch, x64, ps64) {
					l += v * g64[i]
				}
				return l
			}
			if e := relErr(dx, numGrad(x64, loss)); e > gradTol {
				t.Errorf("case %d %s: dx relative error %.2e", ci, gm.Name(), e)
			}
			for i, p := range s.params() {
				if e := relErr(p.Grad, numGrad(ps64[i], loss)); e > gradTol {
					t.Errorf("case %d %s: %s relative error %.2e", ci, gm.Name(), p.Name, e)
				}
			}
		}
	}
}

func TestImpalaStages(t *testing.T) {
	st, err := ImpalaStages(4, 10, 10)
	if err != nil {
		t.Fatal(err)
	}
	// 10 → 5 → 3 → 2: the flattened encoder output is 32·2·2.
	if len(st) != 3 || st[2].Channels*st[2].OutH()*st[2].OutW() != 128 {
		t.Errorf("stages %+v", st)
	}
	if _, err := ImpalaStages(0, 10, 10); !errors.Is(err, ErrConfig) {
		t.Errorf("0 channels: err = %v, want ErrConfig", err)
	}
	bad := []ResidualStage{st[0], st[2]}
	if _, err := NewConvNet(ConvNetConfig{Stages: bad, Out: 2}, rng.New(1, "convnet", 0)); !errors.Is(err, ErrConfig) {
		t.Errorf("stages that do not chain: err = %v, want ErrConfig", err)
	}
	convs, _ := ConvPreset("minatar", 4, 10, 10)
	if _, err := NewConvNet(ConvNetConfig{Convs: convs, Stages: st, Out: 2}, rng.New(1, "convnet", 0)); !errors.Is(err, ErrConfig) {
		t.Errorf("convs and stages together: err = %v, want ErrConfig", err)
	}
}

// TestMaxPoolTiesAndNaN: of equal values the first in the window wins the
// gradient, and a NaN propagates, as in PyTorch's CPU kernel.
func TestMaxPoolTiesAndNaN(t *testing.T) {
	p := maxPool{c: 1, h: 3, w: 3}
	y := p.forward([]float32{1, 1, 0, 1, 1, 0, 0, 0, 0}, 1)
	if len(y) != 4 || y[0] != 1 {
		t.Fatalf("y = %v", y)
	}
	dx := p.backward([]float32{1, 0, 0, 0})
	if dx[0] != 1 || dx[1] != 0 || dx[3] != 0 || dx[4] != 0 {
		t.Errorf("tie: dx = %v, want the gradient on the first maximum", dx)
	}
	nan := float32(math.NaN())
	y = p.forward([]float32{1, nan, 5, 1, 1, 0, 0, 0, 0}, 1)
	if !math.IsNaN(float64(y[0])) {
		t.Errorf("NaN in the window: y[0] = %v", y[0])
	}
}
