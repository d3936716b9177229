package nn

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"os"
	"slices"
	"testing"

	"herd/internal/rng"
)

// lcg is the generator of testdata/gen/conv_torch.py: x ← 1664525·x +
// 1013904223 mod 2³², value ((x >> 8)/2²³ − 1)·scale, exact in float32, so
// both sides fill inputs and weights with the same values.
type lcg struct{ x uint32 }

func (g *lcg) fill(dst []float32, scale float64) {
	for i := range dst {
		g.x = 1664525*g.x + 1013904223
		dst[i] = float32((float64(g.x>>8)/float64(1<<23) - 1) * scale)
	}
}

type torchConvCase struct {
	Name   string `json:"name"`
	In     [3]int `json:"in"`
	Batch  int    `json:"batch"`
	Layers []struct {
		Out     int    `json:"out"`
		Kernel  int    `json:"kernel"`
		Stride  int    `json:"stride"`
		Padding int    `json:"padding"`
		DWeight string `json:"dweight"`
		DBias   string `json:"dbias"`
	} `json:"layers"`
	Y  string `json:"y"`
	DX string `json:"dx"`
}

func decodeF32(t *testing.T, s string) []float32 {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b)%4 != 0 {
		t.Fatalf("bad float32 table entry: %v", err)
	}
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

func relErr32(got, want []float32) float64 { return relErr(got, to64(want)) }

// readGzipJSON decodes the gzip'd JSON file at path into v.
func readGzipJSON(t *testing.T, path string, v any) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.NewDecoder(zr).Decode(v); err != nil {
		t.Fatal(err)
	}
}

// TestConv2dMatchesPyTorch runs the stacks of testdata/conv_torch.json.gz
// (MinAtar's and Nature DQN's convolutions, and strided, padded ones) and
// compares the output and every gradient with PyTorch's.
func TestConv2dMatchesPyTorch(t *testing.T) {
	var table struct {
		Cases []torchConvCase `json:"cases"`
	}
	readGzipJSON(t, "testdata/conv_torch.json.gz", &table)
	if len(table.Cases) != 3 {
		t.Fatalf("%d cases, want 3", len(table.Cases))
	}
	for _, tc := range table.Cases {
		t.Run(tc.Name, func(t *testing.T) {
			g := &lcg{x: 12345}
			c, h, w := tc.In[0], tc.In[1], tc.In[2]
			x := make([]float32, tc.Batch*c*h*w)
			g.fill(x, 1)
			var convs []*Conv2d
			for i, l := range tc.Layers {
				cv, err := NewConv2d("", Conv2dConfig{InChannels: c, InH: h, InW: w, OutChannels: l.Out, Kernel: l.Kernel, Stride: l.Stride, Padding: l.Padding}, nil, rng.New(1, "conv", i))
				if err != nil {
					t.Fatal(err)
				}
				g.fill(cv.weight.Value, 0.5)
				g.fill(cv.bias.Value, 0.5)
				convs = append(convs, cv)
				c, h, w = l.Out, cv.cfg.OutH(), cv.cfg.OutW()
			}
			ys := make([][]float32, len(convs))
			in := x
			for i, cv := range convs {
				y := cv.Forward(in, tc.Batch)
				if i+1 < len(convs) {
					y = append([]float32(nil), y...)
					ReLU.applyInPlace(y)
				}
				ys[i] = y
				in = y
			}
			want := decodeF32(t, tc.Y)
			if e := relErr32(in, want); len(in) != len(want) || e > 1e-5 {
				t.Fatalf("y: %d values, want %d; relative error %.2e", len(in), len(want), e)
			}
			dy := make([]float32, len(in))
			g.fill(dy, 1)
			for i := len(convs) - 1; i >= 0; i-- {
				dx := convs[i].Backward(dy)
				if i > 0 {
					d := make([]float32, len(dx))
					ReLU.backward(d, dx, ys[i-1])
					dy = d
				} else {
					dy = dx
				}
			}
			if e := relErr32(dy, decodeF32(t, tc.DX)); e > 1e-5 {
				t.Errorf("dx: relative error %.2e", e)
			}
			for i, l := range tc.Layers {
				if e := relErr32(convs[i].weight.Grad, decodeF32(t, l.DWeight)); e > 1e-5 {
					t.Errorf("layer %d dweight: relative error %.2e", i, e)
				}
				if e := relErr32(convs[i].bias.Grad, decodeF32(t, l.DBias)); e > 1e-5 {
					t.Errorf("layer %d dbias: relative error %.2e", i, e)
				}
			}
		})
	}
}

// conv64 is the reference: the convolution's definition as direct loops
// in float64, y[n,o,i,j] = b[o] + Σ_{c,di,dj} w[o,c,di,dj]·x[n,c,i·s−p+di,j·s−p+dj].
func conv64(cfg Conv2dConfig, batch int, x, w, b []float64) []float64 {
	oh, ow, k, s, p := cfg.OutH(), cfg.OutW(), cfg.Kernel, cfg.stride(), cfg.Padding
	C, H, W, O := cfg.InChannels, cfg.InH, cfg.InW, cfg.OutChannels
	y := make([]float64, batch*O*oh*ow)
	for n := range batch {
		for o := range O {
			for i := range oh {
				for j := range ow {
					v := b[o]
					for c := range C {
						for di := range k {
							for dj := range k {
								yy, xx := i*s-p+di, j*s-p+dj
								if yy >= 0 && yy < H && xx >= 0 && xx < W {
									v += w[((o*C+c)*k+di)*k+dj] * x[((n*C+c)*H+yy)*W+xx]
								}
							}
						}
					}
					y[((n*O+o)*oh+i)*ow+j] = v
				}
			}
		}
	}
	return y
}

// TestConv2dGradients checks dX, dW and db against central differences of
// conv64 for L = Σ y·g, on strided and padded shapes, every Gemm backend.
func TestConv2dGradients(t *testing.T) {
	cfgs := []Conv2dConfig{
		{InChannels: 2, InH: 5, InW: 6, OutChannels: 3, Kernel: 3},
		{InChannels: 3, InH: 7, InW: 5, OutChannels: 2, Kernel: 3, Stride: 2, Padding: 1},
		{InChannels: 1, InH: 4, InW: 4, OutChannels: 4, Kernel: 2, Stride: 2},
	}
	for ci, cfg := range cfgs {
		for _, gm := range []Gemm{DefaultGemm(), PortableGemm()} {
			r := rng.New(7, "conv-grad", ci)
			cv, err := NewConv2d("c.", cfg, gm, r)
			if err != nil {
				t.Fatal(err)
			}
			const batch = 2
			x := make([]float32, batch*cv.In())
			UniformInit(x, 1, r)
			gOut := make([]float32, batch*cv.Out())
			UniformInit(gOut, 1, r)
			y := cv.Forward(x, batch)
			x64, w64, b64, g64 := to64(x), to64(cv.weight.Value), to64(cv.bias.Value), to64(gOut)
			if e := relErr(y, conv64(cfg, batch, x64, w64, b64)); e > 1e-6 {
				t.Fatalf("case %d %s: forward relative error %.2e", ci, gm.Name(), e)
			}
			dx := cv.Backward(gOut)
			loss := func() float64 {
				var s float64
				for i, v := range conv64(cfg, batch, x64, w64, b64) {
					s += v * g64[i]
				}
				return s
			}
			for _, c := range []struct {
				name string
				got  []float32
				at   []float64
			}{{"dx", dx, x64}, {"dw", cv.weight.Grad, w64}, {"db", cv.bias.Grad, b64}} {
				if e := relErr(c.got, numGrad(c.at, loss)); e > gradTol {
					t.Errorf("case %d %s: %s relative error %.2e", ci, gm.Name(), c.name, e)
				}
			}
		}
	}
}

// TestConv2dGradAccumulates: gradients add up across Backward calls until
// ZeroGrad, as in PyTorch and as MLP does.
func TestConv2dGradAccumulates(t *testing.T) {
	cfg := Conv2dConfig{InChannels: 2, InH: 4, InW: 4, OutChannels: 2, Kernel: 3}
	cv, err := NewConv2d("", cfg, nil, rng.New(1, "conv", 0))
	if err != nil {
		t.Fatal(err)
	}
	x := make([]float32, cv.In())
	UniformInit(x, 1, rng.New(2, "x", 0))
	dy := make([]float32, cv.Out())
	UniformInit(dy, 1, rng.New(3, "dy", 0))
	cv.Forward(x, 1)
	cv.Backward(dy)
	once := append([]float32(nil), cv.weight.Grad...)
	cv.Backward(dy)
	for i, v := range cv.weight.Grad {
		if v != 2*once[i] {
			t.Fatalf("grad[%d] = %v after two Backwards, want %v", i, v, 2*once[i])
		}
	}
}

func TestConv2dConfigErrors(t *testing.T) {
	for _, cfg := range []Conv2dConfig{
		{},
		{InChannels: 1, InH: 2, InW: 2, OutChannels: 1, Kernel: 3},
		{InChannels: 1, InH: 4, InW: 4, OutChannels: 1, Kernel: 3, Stride: -1},
		{InChannels: 1, InH: 4, InW: 4, OutChannels: 1, Kernel: 3, Padding: -2},
	} {
		if _, err := NewConv2d("", cfg, nil, rng.New(1, "conv", 0)); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: err = %v, want ErrConfig", cfg, err)
		}
	}
}

func TestConv2dNoAllocs(t *testing.T) {
	cv, err := NewConv2d("", minatarConv, nil, rng.New(1, "conv", 0))
	if err != nil {
		t.Fatal(err)
	}
	const batch = 32
	x := make([]float32, batch*cv.In())
	dy := make([]float32, batch*cv.Out())
	cv.Forward(x, batch)
	cv.Backward(dy)
	if a := testing.AllocsPerRun(5, func() { cv.Forward(x, batch); cv.Backward(dy) }); a != 0 {
		t.Errorf("%v allocations per Forward+Backward, want 0", a)
	}
}

// The convolutions of MinAtar's DQN network and of Nature DQN (Mnih et
// al. 2015) on 84×84×4 frames.
var (
	minatarConv = Conv2dConfig{InChannels: 4, InH: 10, InW: 10, OutChannels: 16, Kernel: 3, Stride: 1}
	natureConvs = []Conv2dConfig{
		{InChannels: 4, InH: 84, InW: 84, OutChannels: 32, Kernel: 8, Stride: 4},
		{InChannels: 32, InH: 20, InW: 20, OutChannels: 64, Kernel: 4, Stride: 2},
		{InChannels: 64, InH: 9, InW: 9, OutChannels: 64, Kernel: 3, Stride: 1},
	}
)

// BenchmarkConv2d: forward + backward at batch 32 of each preset's
// convolutions (no optimizer step, no ReLU, no gradient for the images),
// nn/testdata/gen/torch_bench.py's cases.
func BenchmarkConv2d(b *testing.B) {
	for _, c := range []struct {
		name string
		cfgs []Conv2dConfig
	}{{"minatar", []Conv2dConfig{minatarConv}}, {"nature", natureConvs}} {
		b.Run(c.name, func(b *testing.B) {
			const batch = 32
			var convs []*Conv2d
			for i, cfg := range c.cfgs {
				cv, err := NewConv2d("", cfg, nil, rng.New(1, "conv", i))
				if err != nil {
					b.Fatal(err)
				}
				convs = append(convs, cv)
			}
			x := make([]float32, batch*convs[0].In())
			UniformInit(x, 1, rng.New(2, "x", 0))
			dy := make([]float32, batch*convs[len(convs)-1].Out())
			UniformInit(dy, 1, rng.New(3, "dy", 0))
			var flops float64
			for i, cv := range convs {
				cfg := cv.cfg
				passes := 3.0 // forward, dW, dX
				if i == 0 {
					passes = 2
				}
				flops += passes * 2 * float64(batch*cfg.OutH()*cfg.OutW()*cfg.OutChannels*cfg.InChannels*cfg.Kernel*cfg.Kernel)
			}
			clock, err := processCPUClock()
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			cpu0 := clock()
			for range b.N {
				in := x
				for _, cv := range convs {
					in = cv.Forward(in, batch)
				}
				d := dy
				for i := len(convs) - 1; i >= 0; i-- {
					d = convs[i].backward(d, i > 0) // as torch_bench.py: no dL/d(images)
				}
			}
			// Process CPU time as well: on shared cores the wall time
			// measures the other jobs.
			cpu := (clock() - cpu0).Seconds()
			b.ReportMetric(cpu/float64(b.N)*1e6, "cpu-µs/op")
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			b.ReportMetric(flops*float64(b.N)/cpu/1e9, "cpu-GFLOP/s")
		})
	}
}

func TestConvPreset(t *testing.T) {
	cfgs, err := ConvPreset("nature", 4, 84, 84)
	if err != nil {
		t.Fatal(err)
	}
	last := cfgs[len(cfgs)-1]
	if len(cfgs) != 3 || last.OutChannels*last.OutH()*last.OutW() != 3136 {
		t.Errorf("nature: %d layers, %d outputs; want 3 and 64·7·7 = 3136", len(cfgs), last.OutChannels*last.OutH()*last.OutW())
	}
	m, err := ConvPreset("minatar", 4, 10, 10)
	if err != nil || m[0].OutChannels*m[0].OutH()*m[0].OutW() != 1024 {
		t.Errorf("minatar: %v; want 16·8·8 = 1024 outputs", err)
	}
	if _, err := ConvPreset("nature", 4, 10, 10); !errors.Is(err, ErrConfig) {
		t.Errorf("nature on 10×10 frames: err = %v, want ErrConfig", err)
	}
	if _, err := ConvPreset("resnet", 4, 84, 84); !errors.Is(err, ErrConfig) {
		t.Errorf("unknown preset: err = %v, want ErrConfig", err)
	}
}

// torchNet is one network of a PyTorch table: its encoder (convolutions
// or residual stages), head, parameters with their gradients, and output.
type torchNet struct {
	Name  string `json:"name"`
	In    [3]int `json:"in"`
	Batch int    `json:"batch"`
	Convs []struct {
		Out, Kernel, Stride, Padding int
	} `json:"convs"`
	Stages []int `json:"stages"`
	Hidden []int `json:"hidden"`
	Out    int   `json:"out"`
	Params []struct {
		Name  string `json:"name"`
		Shape []int  `json:"shape"`
		Grad  string `json:"grad"`
	} `json:"params"`
	Y  string `json:"y"`
	DX string `json:"dx"`
}

// config is the ConvNetConfig of the table's network.
func (tn torchNet) config() ConvNetConfig {
	c, h, w := tn.In[0], tn.In[1], tn.In[2]
	cfg := ConvNetConfig{Hidden: tn.Hidden, Out: tn.Out}
	for _, cv := range tn.Convs {
		cc := Conv2dConfig{InChannels: c, InH: h, InW: w, OutChannels: cv.Out, Kernel: cv.Kernel, Stride: cv.Stride, Padding: cv.Padding}
		cfg.Convs = append(cfg.Convs, cc)
		c, h, w = cc.OutChannels, cc.OutH(), cc.OutW()
	}
	for _, ch := range tn.Stages {
		st := ResidualStage{InChannels: c, InH: h, InW: w, Channels: ch}
		cfg.Stages = append(cfg.Stages, st)
		c, h, w = ch, st.OutH(), st.OutW()
	}
	return cfg
}

// TestConvNetMatchesPyTorch builds the nn.Sequential of the tables' nets
// (conv, ReLU, flatten, Linear, ReLU, Linear; and IMPALA's residual stages,
// flatten, ReLU, Linear, ReLU, Linear), sets its parameters in module
// order, and compares names, shapes, output and every gradient with
// PyTorch's.
func TestConvNetMatchesPyTorch(t *testing.T) {
	var nets []torchNet
	for _, f := range []string{"testdata/conv_torch.json.gz", "testdata/residual_torch.json.gz"} {
		var table struct {
			Nets []torchNet `json:"nets"`
		}
		readGzipJSON(t, f, &table)
		if len(table.Nets) == 0 {
			t.Fatalf("no nets in %s", f)
		}
		nets = append(nets, table.Nets...)
	}
	for _, tn := range nets {
		t.Run(tn.Name, func(t *testing.T) {
			cfg := tn.config()
			net, err := NewConvNet(cfg, rng.New(1, "convnet", 0))
			if err != nil {
				t.Fatal(err)
			}
			ps := net.Params()
			if len(ps) != len(tn.Params) {
				t.Fatalf("%d params, PyTorch has %d", len(ps), len(tn.Params))
			}
			g := &lcg{x: 12345}
			for i, p := range ps {
				want := tn.Params[i]
				if p.Name != want.Name || !slices.Equal(p.Shape, want.Shape) {
					t.Fatalf("param %d: %s %v, PyTorch %s %v", i, p.Name, p.Shape, want.Name, want.Shape)
				}
				tmp := make([]float32, len(p.Value))
				g.fill(tmp, 0.1)
				if p.Transposed {
					transposeTo(p.Value, tmp, p.Shape[0], p.Shape[1])
				} else {
					copy(p.Value, tmp)
				}
			}
			x := make([]float32, tn.Batch*net.In())
			g.fill(x, 1)
			y := append([]float32(nil), net.Forward(x, tn.Batch)...)
			if e := relErr32(y, decodeF32(t, tn.Y)); e > 1e-5 {
				t.Fatalf("y: relative error %.2e", e)
			}
			dy := make([]float32, len(y))
			g.fill(dy, 1)
			dx := net.Backward(dy)
			if e := relErr32(dx, decodeF32(t, tn.DX)); e > 1e-5 {
				t.Errorf("dx: relative error %.2e", e)
			}
			for i, p := range ps {
				want := decodeF32(t, tn.Params[i].Grad)
				got := p.Grad
				if p.Transposed {
					got = make([]float32, len(p.Grad))
					transposeTo(got, p.Grad, p.Shape[1], p.Shape[0])
				}
				if e := relErr32(got, want); e > 1e-5 {
					t.Errorf("%s grad: relative error %.2e", p.Name, e)
				}
			}
			// A clone computes the same; CopyFrom brings another net's weights.
			cl := net.Clone()
			if !slices.Equal(cl.Forward(x, tn.Batch), y) {
				t.Error("clone output differs")
			}
			other, _ := NewConvNet(cfg, rng.New(2, "convnet", 0))
			if err := other.CopyFrom(net); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(other.Forward(x, tn.Batch), y) {
				t.Error("CopyFrom output differs")
			}
		})
	}
}

func TestConvNetConfigErrors(t *testing.T) {
	a := Conv2dConfig{InChannels: 4, InH: 10, InW: 10, OutChannels: 16, Kernel: 3}
	b := Conv2dConfig{InChannels: 8, InH: 8, InW: 8, OutChannels: 16, Kernel: 3}
	for _, cfg := range []ConvNetConfig{
		{Out: 2},
		{Convs: []Conv2dConfig{a, b}, Out: 2},
		{Convs: []Conv2dConfig{a}, Out: 0},
	} {
		if _, err := NewConvNet(cfg, rng.New(1, "convnet", 0)); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: err = %v, want ErrConfig", cfg, err)
		}
	}
}

// TestConvNetSafetensors: a ConvNet's checkpoint holds PyTorch's names and
// shapes ([out, in, k, k] convolutions, [out, in] Linears) and loads back
// into another net with the same outputs.
func TestConvNetSafetensors(t *testing.T) {
	convs, err := ConvPreset("minatar", 4, 10, 10)
	if err != nil {
		t.Fatal(err)
	}
	cfg := ConvNetConfig{Convs: convs, Hidden: []int{128}, Out: 6}
	a, err := NewConvNet(cfg, rng.New(1, "convnet", 0))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := Save(&buf, a.Params(), nil); err != nil {
		t.Fatal(err)
	}
	ck, err := ReadSafetensors(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]int{"0.weight": {16, 4, 3, 3}, "0.bias": {16}, "3.weight": {128, 1024}, "3.bias": {128}, "5.weight": {6, 128}, "5.bias": {6}}
	if len(ck.Tensors) != len(want) {
		t.Fatalf("%d tensors, want %d", len(ck.Tensors), len(want))
	}
	for name, shape := range want {
		if got := ck.Tensors[name].Shape; !slices.Equal(got, shape) {
			t.Errorf("%s: shape %v, want %v", name, got, shape)
		}
	}
	b, err := NewConvNet(cfg, rng.New(2, "convnet", 0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Load(bytes.NewReader(buf.Bytes()), b.Params()); err != nil {
		t.Fatal(err)
	}
	x := make([]float32, 3*a.In())
	UniformInit(x, 1, rng.New(3, "x", 0))
	ya := append([]float32(nil), a.Forward(x, 3)...)
	if !slices.Equal(b.Forward(x, 3), ya) {
		t.Error("loaded net computes other outputs")
	}
}

// TestConvNetBackwardParams checks that skipping the input gradient
// leaves every parameter gradient bit for bit as Backward computes it.
func TestConvNetBackwardParams(t *testing.T) {
	convs, err := ConvPreset("minatar", 4, 10, 10)
	if err != nil {
		t.Fatal(err)
	}
	cfg := ConvNetConfig{Convs: convs, Hidden: []int{32}, Out: 3}
	a, err := NewConvNet(cfg, rng.New(1, "convnet-params", 0))
	if err != nil {
		t.Fatal(err)
	}
	b := a.Clone()
	const batch = 5
	r := rng.New(2, "convnet-params", 0)
	x := make([]float32, batch*4*10*10)
	for i := range x {
		x[i] = float32(r.IntN(2))
	}
	d := make([]float32, batch*3)
	for i := range d {
		d[i] = float32(r.NormFloat64())
	}
	a.ZeroGrad()
	b.ZeroGrad()
	a.Forward(x, batch)
	a.Backward(d)
	b.Forward(x, batch)
	b.BackwardParams(d)
	for i, p := range a.Params() {
		q := b.Params()[i]
		for j := range p.Grad {
			if math.Float32bits(p.Grad[j]) != math.Float32bits(q.Grad[j]) {
				t.Fatalf("param %d grad %d: %v, BackwardParams %v", i, j, p.Grad[j], q.Grad[j])
			}
		}
	}
}
