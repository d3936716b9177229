package ppo

import (
	"context"
	"math"
	"testing"

	"herd/algo"
	"herd/env"
	"herd/internal/rng"
	"herd/nn"
	"herd/sample"
)

// segment is a segment of random CartPole-shaped data gathered with
// weights version v, its behaviour log-probabilities those of a uniform
// policy.
func segment(seed uint64, v uint64) *sample.Segment {
	const T, N = 16, 4
	r := rng.New(seed, "test/ppo-segment", 0)
	s := sample.NewSegment(T, N, 4, 1)
	for k := range s.Obs {
		s.Obs[k] = float32(r.NormFloat64())
	}
	for k := range T * N {
		s.Actions[k] = float32(r.IntN(2))
		s.Rewards[k] = 1
		s.Values[k] = float32(r.NormFloat64())
		s.LogProbs[k] = float32(math.Log(0.5))
		if r.IntN(10) == 0 {
			s.Dones[k] = 1
		}
	}
	for k := range s.NextObs {
		s.NextObs[k] = float32(r.NormFloat64())
	}
	for k := range N {
		s.LastValues[k] = float32(r.NormFloat64())
	}
	s.Version = v
	return s
}

// TestDelayedGradientOption: with delayed_gradient, a segment gathered
// with θ_{k−1} while the learner holds θ_k is learned (one epoch, one
// minibatch) with PPO's gradient at θ_{k−1}, computed here by a fresh
// learner, applied to θ_k with θ_k's Adam state. The minibatch's row order
// comes from the learner's shuffle stream, which the two learners are at
// different points of, so the sums agree to rounding, not bit for bit;
// the default (importance-ratio) form lands far from it.
func TestDelayedGradientOption(t *testing.T) {
	e, err := env.Make("CartPole-v1")
	if err != nil {
		t.Fatal(err)
	}
	sp := algo.SpacesOf(e)
	e.Close()
	h := algo.DefaultHeader()
	h.Env, h.Steps = "CartPole-v1", 64*10
	cfg := DefaultConfig()
	cfg.NumEnvs, cfg.NumSteps, cfg.NumMinibatches, cfg.UpdateEpochs, cfg.AnnealLR = 4, 16, 1, 1, false
	mk := func(delayed bool) *learner {
		c := cfg
		c.DelayedGradient = delayed
		l, err := newLearner(h, &c, sp)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	learn := func(l *learner, seg *sample.Segment) {
		if _, err := l.Learn(context.Background(), seg); err != nil {
			t.Fatal(err)
		}
	}
	got := mk(true)
	learn(got, segment(1, 0))
	learn(got, segment(2, 0))
	at0 := mk(true)
	learn(at0, segment(2, 0))
	want := mk(true)
	learn(want, segment(1, 0))
	wp := want.Agent.Params()
	for i, p := range at0.Agent.Params() {
		copy(wp[i].Grad, p.Grad)
	}
	want.Opt.Step(wp)
	stale := mk(false)
	learn(stale, segment(1, 0))
	learn(stale, segment(2, 0))

	dist := func(a, b []*nn.Param) float64 {
		var d float64
		for i := range a {
			for j := range a[i].Value {
				d = max(d, math.Abs(float64(a[i].Value[j]-b[i].Value[j])))
			}
		}
		return d
	}
	dGot, dStale := dist(got.Agent.Params(), wp), dist(stale.Agent.Params(), wp)
	t.Logf("largest parameter difference to the reference: delayed %g, importance-ratio form %g", dGot, dStale)
	if dGot > 1e-6 {
		t.Errorf("delayed: parameters up to %g from the gradient at θ_{k−1} applied to θ_k", dGot)
	}
	if dStale < 100*max(dGot, 1e-8) {
		t.Errorf("importance-ratio form %g from the reference, delayed %g: the test cannot tell them apart", dStale, dGot)
	}
}
