package nn

import (
	"math"
	"runtime"
	"testing"

	"herd/internal/rng"
)

// TestLearnRegression fits y = sin(2x₀) + ½x₁² on 256 fixed points with a
// 2-32-32-1 tanh MLP and Adam; the MSE must fall from > 0.3 to < 0.01.
func TestLearnRegression(t *testing.T) {
	r := rng.New(11, "nn/learn", 0)
	const n = 256
	x := make([]float32, 2*n)
	y := make([]float32, n)
	for i := 0; i < n; i++ {
		x0, x1 := 2*r.Float64()-1, 2*r.Float64()-1
		x[2*i], x[2*i+1] = float32(x0), float32(x1)
		y[i] = float32(math.Sin(2*x0) + 0.5*x1*x1)
	}
	m, err := NewMLP(MLPConfig{In: 2, Hidden: []int{32, 32}, Out: 1, Act: Tanh}, r)
	if err != nil {
		t.Fatal(err)
	}
	opt, _ := NewAdam(AdamConfig{LR: 1e-2})
	d := make([]float32, n)
	first := MSE(nil, m.Forward(x, n), y)
	var loss float32
	for step := 0; step < 400; step++ {
		loss = MSE(d, m.Forward(x, n), y)
		m.ZeroGrad()
		m.Backward(d)
		opt.Step(m.Params())
	}
	t.Logf("regression MSE %.4f → %.5f", first, loss)
	if first < 0.3 || loss > 0.01 {
		t.Fatalf("regression MSE %.4f → %.5f, want > 0.3 → < 0.01", first, loss)
	}
}

// TestLearnClassification fits three Gaussian blobs with a Categorical
// head and cross-entropy (−log π(label)); accuracy must reach 95% and the
// loss fall below 0.2.
func TestLearnClassification(t *testing.T) {
	r := rng.New(12, "nn/learn", 0)
	const n, k = 300, 3
	centers := [k][2]float64{{-1, 0}, {1, 0}, {0, 1.5}}
	x := make([]float32, 2*n)
	labels := make([]int, n)
	for i := range labels {
		c := i % k
		labels[i] = c
		x[2*i] = float32(centers[c][0] + 0.35*r.NormFloat64())
		x[2*i+1] = float32(centers[c][1] + 0.35*r.NormFloat64())
	}
	m, _ := NewMLP(MLPConfig{In: 2, Hidden: []int{32}, Out: k, Init: Init{Kind: InitOrthogonal}}, r)
	opt, _ := NewRMSProp(RMSPropConfig{LR: 3e-3})
	head := Categorical{N: k}
	lp := make([]float32, n)
	dlp := make([]float32, n)
	for i := range dlp {
		dlp[i] = -1.0 / n // L = −mean log π(label)
	}
	dz := make([]float32, n*k)
	var loss float64
	for step := 0; step < 300; step++ {
		logits := m.Forward(x, n)
		head.LogProbTo(lp, logits, labels)
		loss = 0
		for _, v := range lp {
			loss -= float64(v) / n
		}
		head.Backward(dz, logits, labels, dlp, nil)
		m.ZeroGrad()
		m.Backward(dz)
		opt.Step(m.Params())
	}
	pred := head.ArgmaxTo(make([]int, n), m.Forward(x, n))
	correct := 0
	for i := range pred {
		if pred[i] == labels[i] {
			correct++
		}
	}
	acc := float64(correct) / n
	t.Logf("classification loss %.4f accuracy %.3f", loss, acc)
	if acc < 0.95 || loss > 0.2 {
		t.Fatalf("loss %.4f accuracy %.3f, want < 0.2 and ≥ 0.95", loss, acc)
	}
}

// trainBits runs a fixed number of PPO-like updates (forward, categorical
// head, backward, clip, Adam, Polyak target) and returns all weights.
func trainBits(seed uint64, gemm Gemm) []float32 {
	r := rng.New(seed, "nn/det", 0)
	m, _ := NewMLP(MLPConfig{In: 6, Hidden: []int{64, 64}, Out: 3, Act: Tanh, Gemm: gemm,
		Init: Init{Kind: InitOrthogonal, OutGain: 0.01}}, r)
	target := m.Clone()
	opt, _ := NewAdam(AdamConfig{LR: 3e-3, Eps: 1e-5})
	head := Categorical{N: 3}
	const b = 64
	x := make([]float32, b*6)
	acts := make([]int, b)
	lp := make([]float32, b)
	dlp := make([]float32, b)
	dz := make([]float32, b*3)
	for step := 0; step < 30; step++ {
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		logits := m.Forward(x, b)
		head.SampleTo(acts, logits, r)
		head.LogProbTo(lp, logits, acts)
		for i := range dlp {
			dlp[i] = -float32(r.NormFloat64()) / b
		}
		head.Backward(dz, logits, acts, dlp, nil)
		m.ZeroGrad()
		m.Backward(dz)
		ClipGradNorm(m.Params(), 0.5)
		opt.Step(m.Params())
		_ = PolyakUpdate(target.Params(), m.Params(), 0.05)
	}
	var out []float32
	for _, p := range append(m.Params(), target.Params()...) {
		out = append(out, p.Value...)
	}
	return out
}

// TestDeterminism: the same seed gives bit-identical weights after 30
// updates whatever GOMAXPROCS is, for every backend; another seed differs.
func TestDeterminism(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, be := range orderedBackends() {
		g, _ := GemmByName(be)
		runtime.GOMAXPROCS(1)
		a := trainBits(5, g)
		runtime.GOMAXPROCS(4)
		b := trainBits(5, g)
		for i := range a {
			if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
				t.Fatalf("%s: weight %d differs across GOMAXPROCS: %v vs %v", be, i, a[i], b[i])
			}
		}
		c := trainBits(6, g)
		same := true
		for i := range a {
			if a[i] != c[i] {
				same = false
				break
			}
		}
		if same {
			t.Fatalf("%s: seeds 5 and 6 gave identical weights", be)
		}
	}
}

// TestForwardRowIndependence: a row's output has the same bits alone and
// inside any batch (needed for HTS mode, where batch composition varies).
func TestForwardRowIndependence(t *testing.T) {
	for _, be := range orderedBackends() {
		g, _ := GemmByName(be)
		r := rng.New(3, "nn/rows", 0)
		for _, act := range []Activation{ReLU, Tanh} {
			m, _ := NewMLP(MLPConfig{In: 5, Hidden: []int{70, 64}, Out: 3, Act: act, OutAct: Tanh, Gemm: g}, r)
			rowIndependence(t, be, m)
		}
	}
}

func rowIndependence(t *testing.T, be string, m *MLP) {
	r := rng.New(4, "nn/rows", 0)
	{
		const b = 11
		x := randn(r, b*5, 1)
		all := append([]float32(nil), m.Forward(x, b)...)
		for i := 0; i < b; i++ {
			one := m.Forward(x[i*5:(i+1)*5], 1)
			for j := range one {
				if math.Float32bits(one[j]) != math.Float32bits(all[i*3+j]) {
					t.Fatalf("%s: row %d output %d: %v alone, %v in batch", be, i, j, one[j], all[i*3+j])
				}
			}
		}
	}
}

// orderedBackends lists the backends whose summation order herd controls
// (gonum's and OpenBLAS's kernels are theirs).
func orderedBackends() []string {
	var out []string
	for _, be := range GemmBackends() {
		if be != "gonum" && be != "openblas" {
			out = append(out, be)
		}
	}
	return out
}
