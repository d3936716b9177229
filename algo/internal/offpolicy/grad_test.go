package offpolicy

import (
	"fmt"
	"math"
	"testing"

	"herd/algo/internal/learntest"
	"herd/internal/rng"
	"herd/nn"
)

const obsDim, actDim, batch = 3, 2, 5

// testNets returns a small actor, its tanh head and two critics.
func testNets(t *testing.T) (*nn.MLP, *nn.TanhActor, []*nn.Critic) {
	t.Helper()
	r := rng.New(1, "test/grad", 0)
	actor, err := nn.NewMLP(nn.MLPConfig{In: obsDim, Hidden: []int{8}, Out: actDim, Act: nn.ReLU}, r)
	if err != nil {
		t.Fatal(err)
	}
	head, err := nn.NewTanhActor([]float32{-2, -1}, []float32{2, 3})
	if err != nil {
		t.Fatal(err)
	}
	qs, err := NewCritics(2, obsDim, actDim, []int{8}, r)
	if err != nil {
		t.Fatal(err)
	}
	return actor, head, qs
}

func randIn(seed uint64, n int) []float32 {
	r := rng.New(seed, "test/grad/in", 0)
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return x
}

// TestDPGGradient checks the deterministic policy gradient of TD3 and
// DDPG: dL/d(actor output) for L = −mean_r Q(s_r, tanh(out_r)·scale +
// bias), against central differences of a float64 reference.
func TestDPGGradient(t *testing.T) {
	actor, head, qs := testNets(t)
	obs := randIn(2, batch*obsDim)
	pi, dOut, dQ := make([]float32, batch*actDim), make([]float32, batch*actDim), make([]float32, batch)
	loss := DPGGrad(actor, head, qs[0], obs, batch, pi, dOut, dQ)

	out := learntest.To64(actor.Forward(obs, batch))
	q64 := learntest.NewMLP64(qs[0].Net)
	obs64 := learntest.To64(obs)
	ref := func() float64 {
		a := make([]float64, len(out))
		for k, v := range out {
			j := k % actDim
			a[k] = math.Tanh(v)*float64(head.Scale[j]) + float64(head.Bias[j])
		}
		var s float64
		for _, q := range learntest.Critic64(q64, obs64, a, obsDim, actDim, batch) {
			s -= q
		}
		return s / batch
	}
	if d := math.Abs(ref() - loss); d > 1e-5*max(1, math.Abs(loss)) {
		t.Errorf("loss %v, reference %v", loss, ref())
	}
	learntest.CheckGrad(t, "dL/d(actor output)", dOut, learntest.NumGrad(out, ref))
}

// TestTwinFitGradient checks the clipped double-Q critic loss of SAC and
// TD3, L = MSE(Q1(s, a), y) + MSE(Q2(s, a), y), against central
// differences over every parameter of both critics.
func TestTwinFitGradient(t *testing.T) {
	_, _, qs := testNets(t)
	obs, act, y := randIn(3, batch*obsDim), randIn(4, batch*actDim), randIn(5, batch)
	tw := NewTwin(qs[0], qs[1], nil, batch)
	loss, _, _ := tw.FitGrad(obs, act, y, batch)

	ms := []*learntest.MLP64{learntest.NewMLP64(qs[0].Net), learntest.NewMLP64(qs[1].Net)}
	obs64, act64 := learntest.To64(obs), learntest.To64(act)
	ref := func() float64 {
		var l float64
		for _, m := range ms {
			for r, q := range learntest.Critic64(m, obs64, act64, obsDim, actDim, batch) {
				d := q - float64(y[r])
				l += d * d / batch
			}
		}
		return l
	}
	if d := math.Abs(ref() - loss); d > 1e-5*max(1, math.Abs(loss)) {
		t.Errorf("loss %v, reference %v", loss, ref())
	}
	for i, q := range qs {
		for j, p := range q.Params() {
			learntest.CheckGrad(t, fmt.Sprintf("Q%d %s", i+1, p.Name), p.Grad, learntest.NumGrad(ms[i].P[j], ref))
		}
	}
}
