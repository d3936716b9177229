package nn

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"testing"

	"herd/internal/rng"
)

func closeTo(a float32, b float64, tol float64) bool {
	return math.Abs(float64(a)-b) <= tol*(1+math.Abs(b))
}

// TestAdamMatchesReference runs 5 Adam steps (with L2 and with decoupled
// weight decay) against a float64 transcription of the update rule.
func TestAdamMatchesReference(t *testing.T) {
	for variant := 0; variant < 3; variant++ {
		decoupled, wd := variant == 1, 0.01
		if variant == 2 {
			wd = 0 // the SIMD path
		}
		p := NewParam("w", 11)
		copy(p.Value, []float32{0.5, -1, 2, 0, 1, 1, 1, 1, -3, 0.1, 7})
		o, err := NewAdam(AdamConfig{LR: 0.1, WeightDecay: float32(wd), Decoupled: decoupled})
		if err != nil {
			t.Fatal(err)
		}
		w := to64(p.Value)
		m, v := make([]float64, 11), make([]float64, 11)
		grads := [][]float32{{1, -2, 0.5, 3, 1, 2, 3, 4, 5, 6, 7}, {0.1, 0.2, -0.3, 0, 0, 0, 0, 0, 1, 1, 1},
			{-1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1}, {2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2}, {0, 0, 0, 1e-3, 0, 0, 0, 0, 0, 0, 0}}
		for step, g := range grads {
			copy(p.Grad, g)
			o.Step([]*Param{p})
			tt := float64(step + 1)
			for i := range w {
				gi := float64(g[i])
				if decoupled {
					w[i] -= 0.1 * wd * w[i]
				} else {
					gi += wd * w[i]
				}
				m[i] = 0.9*m[i] + 0.1*gi
				v[i] = 0.999*v[i] + 0.001*gi*gi
				mh := m[i] / (1 - math.Pow(0.9, tt))
				vh := v[i] / (1 - math.Pow(0.999, tt))
				w[i] -= 0.1 * mh / (math.Sqrt(vh) + 1e-8)
			}
			for i := range w {
				if !closeTo(p.Value[i], w[i], 1e-5) {
					t.Fatalf("variant %d step %d: w[%d]=%v want %v", variant, step, i, p.Value[i], w[i])
				}
			}
		}
	}
}

func TestSGDAndRMSProp(t *testing.T) {
	p := NewParam("w", 2)
	copy(p.Value, []float32{1, -1})
	sgd, _ := NewSGD(0.1, 0.9, 0)
	copy(p.Grad, []float32{1, 2})
	sgd.Step([]*Param{p})
	sgd.Step([]*Param{p}) // buffer: 1 then 1.9 → w = 1 − 0.1 − 0.19
	if !closeTo(p.Value[0], 1-0.1-0.19, 1e-6) || !closeTo(p.Value[1], -1-0.2-0.38, 1e-6) {
		t.Fatalf("SGD momentum: %v", p.Value)
	}
	q := NewParam("w", 1)
	rms, _ := NewRMSProp(RMSPropConfig{LR: 0.01, Alpha: 0.9, Eps: 1e-8})
	q.Grad[0] = 2
	rms.Step([]*Param{q})
	// v = 0.1·4 = 0.4; w = −0.01·2/√0.4
	if !closeTo(q.Value[0], -0.01*2/math.Sqrt(0.4), 1e-6) {
		t.Fatalf("RMSProp: %v", q.Value[0])
	}
	rms.SetLR(0.5)
	if rms.LR() != 0.5 {
		t.Fatal("SetLR")
	}
}

func TestOptimizerConfigErrors(t *testing.T) {
	if _, err := NewAdam(AdamConfig{LR: -1, Beta1: 1.5}); !errors.Is(err, ErrConfig) {
		t.Fatalf("Adam: %v", err)
	}
	if _, err := NewSGD(0.1, 1, 0); !errors.Is(err, ErrConfig) {
		t.Fatalf("SGD: %v", err)
	}
	if _, err := NewRMSProp(RMSPropConfig{Alpha: 2}); !errors.Is(err, ErrConfig) {
		t.Fatalf("RMSProp: %v", err)
	}
	if _, err := NewMLP(MLPConfig{In: 0, Out: -1, Hidden: []int{0}}, rng.New(1, "x", 0)); !errors.Is(err, ErrConfig) {
		t.Fatalf("MLP: %v", err)
	}
	if _, err := NewMLP(MLPConfig{In: 1, Out: 1}, nil); !errors.Is(err, ErrConfig) {
		t.Fatalf("MLP nil rng: %v", err)
	}
	if _, err := NewTanhGaussian([]float32{1}, []float32{1}); !errors.Is(err, ErrConfig) {
		t.Fatalf("TanhGaussian: %v", err)
	}
	if err := PolyakUpdate([]*Param{NewParam("a", 2)}, []*Param{NewParam("a", 3)}, 0.5); !errors.Is(err, ErrShape) {
		t.Fatalf("Polyak shape: %v", err)
	}
	if err := PolyakUpdate(nil, nil, 2); !errors.Is(err, ErrConfig) {
		t.Fatalf("Polyak tau: %v", err)
	}
	if _, err := GemmByName("cuda"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("GemmByName: %v", err)
	}
}

func TestClipScheduleTargets(t *testing.T) {
	a, b := NewParam("a", 2), NewParam("b", 1)
	copy(a.Grad, []float32{3, 0})
	b.Grad[0] = 4
	n := ClipGradNorm([]*Param{a, b}, 1)
	if math.Abs(n-5) > 1e-9 {
		t.Fatalf("norm %v want 5", n)
	}
	if got := GradNorm([]*Param{a, b}); math.Abs(got-1) > 1e-5 {
		t.Fatalf("clipped norm %v want 1", got)
	}
	if n := ClipGradNorm([]*Param{a, b}, 10); math.Abs(GradNorm([]*Param{a, b})-n) > 1e-9 {
		t.Fatal("clipping below the limit changed the gradient")
	}
	for _, c := range []struct {
		step int
		want float32
	}{{0, 1}, {5, 0.5}, {10, 0}, {20, 0}} {
		if got := LinearSchedule(1, 0, c.step, 10); math.Abs(float64(got-c.want)) > 1e-6 {
			t.Errorf("LinearSchedule step %d = %v want %v", c.step, got, c.want)
		}
	}
	src, dst := NewParam("w", 2), NewParam("w", 2)
	copy(src.Value, []float32{1, 2})
	_ = PolyakUpdate([]*Param{dst}, []*Param{src}, 0.25)
	if dst.Value[0] != 0.25 || dst.Value[1] != 0.5 {
		t.Fatalf("Polyak: %v", dst.Value)
	}
	_ = HardUpdate([]*Param{dst}, []*Param{src})
	if dst.Value[0] != 1 || dst.Value[1] != 2 {
		t.Fatalf("HardUpdate: %v", dst.Value)
	}
}

// TestOrthogonalInit: W·Wᵀ = gain²·I for wide matrices, Wᵀ·W for tall ones.
func TestOrthogonalInit(t *testing.T) {
	r := rng.New(1, "nn/init", 0)
	for _, sz := range [][2]int{{8, 8}, {16, 5}, {3, 12}} {
		rows, cols := sz[0], sz[1]
		w := make([]float32, rows*cols)
		OrthogonalInit(w, rows, cols, 2, r)
		small, big := rows, cols // rows of W are orthonormal when rows ≤ cols
		dot := func(i, j int) float64 {
			var s float64
			if rows <= cols {
				for k := 0; k < cols; k++ {
					s += float64(w[i*cols+k]) * float64(w[j*cols+k])
				}
			} else {
				for k := 0; k < rows; k++ {
					s += float64(w[k*cols+i]) * float64(w[k*cols+j])
				}
			}
			return s
		}
		if rows > cols {
			small, big = cols, rows
		}
		_ = big
		for i := 0; i < small; i++ {
			for j := 0; j < small; j++ {
				want := 0.0
				if i == j {
					want = 4
				}
				if math.Abs(dot(i, j)-want) > 1e-4 {
					t.Fatalf("%v: <%d,%d> = %v want %v", sz, i, j, dot(i, j), want)
				}
			}
		}
	}
	// PyTorch default bound 1/√fan_in and zero biases for the other kinds.
	m, _ := NewMLP(MLPConfig{In: 16, Out: 4}, r)
	for _, v := range m.Params()[0].Value {
		if math.Abs(float64(v)) > 0.25 {
			t.Fatalf("torch default weight %v outside ±1/√16", v)
		}
	}
	m, _ = NewMLP(MLPConfig{In: 16, Out: 4, Init: Init{Kind: InitXavierUniform}}, r)
	for _, v := range m.Params()[1].Value {
		if v != 0 {
			t.Fatal("xavier bias not zero")
		}
	}
}

// TestRMSPropMatchesPyTorch replays torch.optim.RMSprop's steps, plain and
// centered (nn/testdata/gen/rmsprop_torch.py wrote the table).
func TestRMSPropMatchesPyTorch(t *testing.T) {
	raw, err := os.ReadFile("testdata/rmsprop_torch.json")
	if err != nil {
		t.Fatal(err)
	}
	var table struct {
		Cases []struct {
			Name           string
			LR, Alpha, Eps float32
			Centered       bool
			W0             []float32
			Grads, After   [][]float32
		}
	}
	if err := json.Unmarshal(raw, &table); err != nil {
		t.Fatal(err)
	}
	if len(table.Cases) == 0 {
		t.Fatal("empty table")
	}
	for _, c := range table.Cases {
		o, err := NewRMSProp(RMSPropConfig{LR: c.LR, Alpha: c.Alpha, Eps: c.Eps, Centered: c.Centered})
		if err != nil {
			t.Fatal(err)
		}
		p := &Param{Name: "w", Value: append([]float32(nil), c.W0...), Grad: make([]float32, len(c.W0))}
		for s, g := range c.Grads {
			copy(p.Grad, g)
			o.Step([]*Param{p})
			for i, want := range c.After[s] {
				// Relative to the step taken, which is what the
				// optimizer computes.
				step := math.Abs(float64(c.After[s][i]) - float64(c.W0[i]))
				if d := math.Abs(float64(p.Value[i] - want)); d > 1e-5*step+1e-7 {
					t.Fatalf("%s step %d w[%d] = %v, torch %v", c.Name, s, i, p.Value[i], want)
				}
			}
		}
	}
}
