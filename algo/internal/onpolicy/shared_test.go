package onpolicy

import (
	"math"
	"slices"
	"strings"
	"testing"

	"herd/env"
	"herd/internal/rng"
)

func imageSpace(h, w, c int) env.Box {
	b := env.UniformBox(0, 1, h*w*c)
	b.Dims = []int{h, w, c}
	return b
}

func newSharedAgent(t *testing.T, parallel bool) *Agent {
	t.Helper()
	a, err := NewAgent(imageSpace(6, 5, 2), env.Discrete{N: 3},
		AgentConfig{Encoder: "minatar", SharedEncoder: true, Hidden: []int{8}, Parallel: parallel}, rng.New(1, "test/shared", 0))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func sharedBatch(b int) (obs, acts []float32) {
	r := rng.New(4, "test/data", 0)
	obs, acts = make([]float32, b*60), make([]float32, b)
	for i := range obs {
		obs[i] = float32(r.Float64())
	}
	for i := range acts {
		acts[i] = float32(r.IntN(3))
	}
	return obs, acts
}

// TestSharedEncoderLayout: one encoder named network.*, then the heads,
// CleanRL's ppo_atari.py module names and order.
func TestSharedEncoderLayout(t *testing.T) {
	a := newSharedAgent(t, false)
	defer a.Close()
	var names []string
	for _, p := range a.Params() {
		names = append(names, p.Name)
	}
	want := []string{"network.0.weight", "network.0.bias", "network.3.weight", "network.3.bias",
		"actor.weight", "actor.bias", "critic.weight", "critic.bias"}
	if !slices.Equal(names, want) {
		t.Fatalf("params %v, want %v", names, want)
	}
	for _, cfg := range []AgentConfig{
		{Encoder: "mlp", SharedEncoder: true, Hidden: []int{8}},
		{Encoder: "minatar", SharedEncoder: true},
	} {
		if _, err := NewAgent(imageSpace(6, 5, 2), env.Discrete{N: 3}, cfg, rng.New(1, "x", 0)); err == nil || !strings.Contains(err.Error(), "shared encoder") {
			t.Errorf("%+v: %v, want a shared-encoder error", cfg, err)
		}
	}
}

// TestSharedEncoderGradients: dL/dθ of every parameter, the shared
// encoder's included, matches central differences of
// L = Σ c1·log π + c2·H + c3·V, in which both heads read the encoder.
func TestSharedEncoderGradients(t *testing.T) {
	const B = 4
	a := newSharedAgent(t, false)
	defer a.Close()
	obs, acts := sharedBatch(B)
	c1 := []float32{0.7, -0.4, 1.1, 0.3}
	c2 := []float32{-0.05, 0.2, 0.1, -0.3}
	c3 := []float32{0.9, 0.5, -0.8, 0.6}
	lp, ent, v := make([]float32, B), make([]float32, B), make([]float32, B)
	loss := func() float64 {
		a.Evaluate(lp, ent, v, obs, acts, B)
		var l float64
		for r := range B {
			l += float64(c1[r])*float64(lp[r]) + float64(c2[r])*float64(ent[r]) + float64(c3[r])*float64(v[r])
		}
		return l
	}
	loss()
	a.ZeroGrad()
	a.Backward(c1, c2, c3)
	checked, bad := 0, 0
	for _, p := range a.Params() {
		grad := slices.Clone(p.Grad)
		step := max(1, len(p.Value)/12)
		for j := 0; j < len(p.Value); j += step {
			const eps = 2e-4 // small: a ReLU input of the batch is 7e-4 from its kink
			x := p.Value[j]
			p.Value[j] = x + eps
			up := loss()
			p.Value[j] = x - eps
			down := loss()
			p.Value[j] = x
			fd := (up - down) / (2 * eps)
			checked++
			if math.Abs(fd-float64(grad[j])) > 3e-3+0.02*math.Abs(fd) {
				bad++
				t.Errorf("%s[%d]: grad %v, central difference %v", p.Name, j, grad[j], fd)
			}
		}
	}
	if checked < 40 || bad > 0 {
		t.Fatalf("%d of %d gradients off", bad, checked)
	}
}

// TestSharedEncoderLearn: Learn (sequential or parallel heads) computes
// what Evaluate + ZeroGrad + Backward compute, bit for bit, and the
// encoder's gradient is the sum of the two heads' contributions.
func TestSharedEncoderLearn(t *testing.T) {
	const B = 5
	obs, acts := sharedBatch(B)
	policy, value := testLosses(B)
	grads := func(a *Agent) [][]float32 {
		var out [][]float32
		for _, p := range a.Params() {
			out = append(out, slices.Clone(p.Grad))
		}
		return out
	}
	backward := func(actor, critic bool) [][]float32 {
		a := newSharedAgent(t, false)
		defer a.Close()
		lp, ent, v := make([]float32, B), make([]float32, B), make([]float32, B)
		a.Evaluate(lp, ent, v, obs, acts, B)
		dl, de, dv := make([]float32, B), make([]float32, B), make([]float32, B)
		if actor {
			policy(dl, de, lp, ent)
		}
		if critic {
			value(dv, v)
		}
		a.ZeroGrad()
		a.Backward(dl, de, dv)
		return grads(a)
	}
	ref, onlyActor, onlyCritic := backward(true, true), backward(true, false), backward(false, true)
	for i := range 4 { // the encoder's tensors
		for j := range ref[i] {
			sum := onlyActor[i][j] + onlyCritic[i][j]
			if d := math.Abs(float64(ref[i][j] - sum)); d > 1e-6+1e-4*math.Abs(float64(sum)) {
				t.Fatalf("encoder tensor %d grad %d: %v, the heads' contributions sum to %v", i, j, ref[i][j], sum)
			}
		}
		if slices.Equal(onlyActor[i], ref[i]) || slices.Equal(onlyCritic[i], ref[i]) {
			t.Fatalf("encoder tensor %d: one head's gradient is the whole", i)
		}
	}
	for _, parallel := range []bool{false, true} {
		a := newSharedAgent(t, parallel)
		a.Learn(obs, acts, B, policy, value)
		a.Learn(obs, acts, B, policy, value) // twice: gradients must not accumulate
		a.Close()
		for i, g := range grads(a) {
			if !slices.Equal(g, ref[i]) {
				t.Fatalf("parallel=%v %s: Learn's gradient differs from Evaluate + Backward", parallel, a.Params()[i].Name)
			}
		}
	}
}

// TestSharedEncoderPolicy: the policy's rows (actor and critic on one
// encoder pass) equal Act's action and Value's value.
func TestSharedEncoderPolicy(t *testing.T) {
	const B = 3
	a := newSharedAgent(t, false)
	defer a.Close()
	obs, _ := sharedBatch(B)
	v := a.Value(make([]float32, B), obs, B)
	for r := range B {
		var one [1]float32
		if got := a.Value(one[:], obs[r*60:(r+1)*60], 1); got[0] != v[r] {
			t.Fatalf("row %d: value %v alone, %v in a batch", r, got[0], v[r])
		}
	}
}
