package onpolicy

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"herd/algo"
	"herd/env"
	"herd/nn"
	"herd/sample"
)

// pooled returns the mean and variance of the union of a pseudo-sample of
// weight 1e-4 with mean 0 and variance 1 (RunningMeanStd's start) and xs,
// from the sums of values and squares.
func pooled(xs []float64) (mean, vr float64) {
	n, s, sq := rmsEpsCount, 0.0, rmsEpsCount*1.0
	for _, x := range xs {
		n++
		s += x
		sq += x * x
	}
	mean = s / n
	return mean, sq/n - mean*mean
}

// TestRMSUpdateIsPooledMoments pins rmsUpdate to what SB3's
// RunningMeanStd computes: folding batches of any sizes, one after
// another, leaves the mean and variance of everything folded together
// with the starting pseudo-sample.
func TestRMSUpdateIsPooledMoments(t *testing.T) {
	const d = 3
	r := rand.New(rand.NewPCG(3, 4))
	st := newRMS("x", d).Value
	cols := make([][]float64, d)
	for _, n := range []int{1, 7, 64, 5} {
		x := make([]float32, n*d)
		for i := range x {
			x[i] = float32(2*r.NormFloat64() + float64(i%d) - 1)
			cols[i%d] = append(cols[i%d], float64(x[i]))
		}
		rmsUpdate(st, d, x, n)
	}
	if math.Abs(float64(st[0])-(77+rmsEpsCount)) > 1e-3 {
		t.Fatalf("count %v, want 77.0001", st[0])
	}
	for j := range d {
		m, v := pooled(cols[j])
		if math.Abs(float64(st[1+j])-m) > 1e-5 || math.Abs(float64(st[1+d+j])-v) > 1e-5*v {
			t.Errorf("column %d: mean %v var %v, want %v %v", j, st[1+j], st[1+d+j], m, v)
		}
	}
}

// TestObsNormFormula: x̃ = clip((x − μ)/√(σ² + 1e-8), ±10), per value.
func TestObsNormFormula(t *testing.T) {
	o := newObsNorm(2)
	copy(o.p.Value, []float32{50, 1, -2, 4, 0.25})
	var buf []float32
	got := o.to(&buf, []float32{3, 0, 100, -2}, 2)
	want := []float64{(3 - 1) / math.Sqrt(4+1e-8), (0 + 2) / math.Sqrt(0.25+1e-8), 10, 0}
	for i, w := range want {
		if math.Abs(float64(got[i])-w) > 1e-6 {
			t.Fatalf("normalized %v, want %v", got, want)
		}
	}
	var nilNorm *ObsNorm
	if x := []float32{7}; &nilNorm.to(&buf, x, 1)[0] != &x[0] {
		t.Fatal("a nil ObsNorm copies")
	}
}

// TestRewardNormIsVecNormalize pins the reward statistics to
// VecNormalize's: the variance of every env's discounted return
// R_t = Σ_k γ^k r_{t−k} (since its episode began) at every step, folded
// with the starting pseudo-sample; two env workers keep their own
// returns, and the returns survive MarshalBinary.
func TestRewardNormIsVecNormalize(t *testing.T) {
	const T, N, gamma = 9, 3, 0.9
	r := rand.New(rand.NewPCG(5, 6))
	n := newRewardNorm()
	var all []float64
	hist := map[[2]int][]float64{} // (worker, env) → rewards since its episode began
	for k, worker := range []int{0, 1, 0, 0} {
		seg := sample.NewSegment(T, N, 1, 1)
		seg.Worker = worker
		for i := range seg.Rewards {
			seg.Rewards[i] = float32(r.NormFloat64() + 1)
			if r.IntN(5) == 0 {
				seg.Dones[i] = 1
			}
		}
		for ts := range T {
			for e := range N {
				key := [2]int{worker, e}
				hist[key] = append(hist[key], float64(seg.Rewards[ts*N+e]))
				var ret float64
				for j, rw := range hist[key] {
					ret += math.Pow(gamma, float64(len(hist[key])-1-j)) * rw
				}
				all = append(all, ret)
				if seg.Dones[ts*N+e] != 0 {
					hist[key] = nil
				}
			}
		}
		if k == 2 {
			m := newRewardNorm()
			if err := m.UnmarshalBinary(n.MarshalBinary()); err != nil {
				t.Fatal(err)
			}
			copy(m.p.Value, n.p.Value)
			n = m
		}
		n.Update(seg, gamma)
	}
	_, v := pooled(all)
	if got := float64(n.p.Value[2]); math.Abs(got-v) > 1e-5*v {
		t.Fatalf("return variance %v, want %v", got, v)
	}
	if s := float64(n.Scale()); math.Abs(s-math.Sqrt(v+1e-8)) > 1e-6 {
		t.Fatalf("scale %v, want √(%v + 1e-8)", s, v)
	}
	if err := n.UnmarshalBinary([]byte{1, 0, 0, 0, 9}); err == nil {
		t.Fatal("a truncated state was accepted")
	}
}

// cartPole is a run header and the spaces of CartPole-v1.
func cartPole(t *testing.T) (algo.Header, algo.Spaces) {
	t.Helper()
	h := algo.DefaultHeader()
	h.Env = "CartPole-v1"
	e, err := env.Make(h.Env)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	return h, algo.Spaces{Obs: e.ObservationSpace(), Act: e.ActionSpace()}
}

// TestRewardNormAdvantages: with the critic scaled by σ (its outputs
// leave the agent multiplied by σ), Begin's advantages are GAE on the
// normalized rewards r/σ and the critic's own outputs V/σ, and the
// returns stay raw (the value loss divides them by σ).
func TestRewardNormAdvantages(t *testing.T) {
	const T, N, gamma, lambda = 6, 2, 0.95, 0.8
	h, sp := cartPole(t)
	l, err := NewLearner("ppo", h, sp, AgentConfig{Hidden: []int{4}, Act: nn.Tanh, NormReward: true}, nil, 1, gamma, lambda)
	if err != nil {
		t.Fatal(err)
	}
	l.Agent.RNorm.p.Value[2] = 9
	const s = 3.0
	seg := sample.NewSegment(T, N, l.Agent.ObsDim, l.Agent.ActDim)
	r := rand.New(rand.NewPCG(7, 8))
	for i := range seg.Rewards {
		seg.Rewards[i], seg.Values[i] = float32(r.NormFloat64()), float32(s*r.NormFloat64())
	}
	seg.Dones[3] = 1
	seg.LastValues[0], seg.LastValues[1] = 1.5, -0.6
	if _, err := l.Begin(context.Background(), seg); err != nil {
		t.Fatal(err)
	}
	div := func(x []float32) []float32 {
		out := make([]float32, len(x))
		for i, v := range x {
			out[i] = v / s
		}
		return out
	}
	adv := make([]float32, T*N)
	GAE(adv, div(seg.Rewards), div(seg.Values), seg.Dones, div(seg.LastValues), N, gamma, lambda)
	for i := range adv {
		if math.Abs(float64(l.Adv[i]-adv[i])) > 1e-5 || math.Abs(float64(l.Returns[i]-s*(adv[i]+seg.Values[i]/s))) > 1e-4 {
			t.Fatalf("row %d: advantage %v return %v, want %v and %v", i, l.Adv[i], l.Returns[i], adv[i], s*(adv[i]+seg.Values[i]/s))
		}
	}
}

// TestNormStatsTravelWithWeights: the statistics are parameters, so a
// policy acting with a learner's weight version (HTS, dist) normalizes
// and scales as the learner does.
func TestNormStatsTravelWithWeights(t *testing.T) {
	h, sp := cartPole(t)
	cfg := AgentConfig{Hidden: []int{4}, Act: nn.Tanh, NormObs: true, NormReward: true}
	l, err := NewLearner("ppo", h, sp, cfg, nil, 1, 0.99, 0.95)
	if err != nil {
		t.Fatal(err)
	}
	pol, err := NewPolicy(sp, cfg, rand.New(rand.NewPCG(1, 1)))
	if err != nil {
		t.Fatal(err)
	}
	obs := []float32{0.5, -1, 2, 0.1}
	copy(l.Agent.ObsNorm.p.Value, []float32{10, 1, 0, -1, 2, 4, 0.5, 9, 1})
	l.Agent.RNorm.p.Value[2] = 16
	if err := pol.SetWeights(l.Weights()); err != nil {
		t.Fatal(err)
	}
	row := pol.ForwardTo(make([]float32, pol.OutDim()), obs, 1)
	want := l.Agent.Value(make([]float32, 1), obs, 1)[0]
	if row[2] != want || pol.ValuesTo(make([]float32, 1), obs, 1)[0] != want {
		t.Fatalf("policy value %v, learner's %v", row[2], want)
	}
	var raw [1]float32
	l.Agent.critic.ForwardTo(raw[:], obs, 1)
	if math.Abs(float64(want-4*raw[0])) < 1e-3 {
		t.Fatal("the value does not depend on the statistics")
	}
}
