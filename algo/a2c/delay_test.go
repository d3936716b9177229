package a2c

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
// weights version v; its behaviour log-probabilities are NaN, since A2C's
// gradient must not read them.
func segment(seed uint64, v uint64) *sample.Segment {
	const T, N = 8, 4
	r := rng.New(seed, "test/a2c-segment", 0)
	s := sample.NewSegment(T, N, 4, 1)
	for k := range s.Obs {
		s.Obs[k] = float32(r.NormFloat64())
	}
	for k := range T * N {
		s.Actions[k] = float32(r.IntN(2))
		s.Rewards[k] = 1
		s.Values[k] = float32(r.NormFloat64())
		s.LogProbs[k] = float32(math.NaN())
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

// TestDelayedGradient pins HTS-RL's Eq. 6: a segment gathered with θ_{k−1}
// while the learner holds θ_k is learned with the synchronous A2C gradient
// evaluated at θ_{k−1} (computed here by a fresh learner at θ_{k−1}),
// applied to θ_k with θ_k's optimizer state — bit for bit, for RMSprop and
// Adam, with and without learning-rate annealing.
func TestDelayedGradient(t *testing.T) {
	e, err := env.Make("CartPole-v1")
	if err != nil {
		t.Fatal(err)
	}
	sp := algo.SpacesOf(e)
	e.Close()
	h := algo.DefaultHeader()
	h.Env, h.Steps = "CartPole-v1", 3200
	for _, c := range []struct {
		rms, anneal bool
	}{{true, false}, {false, true}} {
		cfg := DefaultConfig()
		cfg.NumEnvs, cfg.NumSteps, cfg.UseRMSProp, cfg.AnnealLR = 4, 8, c.rms, c.anneal
		mk := func() *learner {
			l, err := newLearner(h, &cfg, sp)
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
		// Under test: θ_1 = learn(θ_0, seg 0); then seg 1, gathered with θ_0.
		got := mk()
		learn(got, segment(1, 0))
		learn(got, segment(2, 0))

		// Reference: the synchronous gradient of seg 1 at θ_0 (clipped), …
		at0 := mk()
		learn(at0, segment(2, 0))
		// … applied to θ_1 with θ_1's optimizer state and learning rate.
		want := mk()
		learn(want, segment(1, 0))
		wp, gp := want.Agent.Params(), got.Agent.Params()
		for i, p := range at0.Agent.Params() {
			copy(wp[i].Grad, p.Grad)
		}
		if c.anneal {
			// Iteration 2's rate, as got's second Learn set it.
			want.Opt.SetLR(got.Opt.LR())
		}
		want.Opt.Step(wp)

		// The stale-policy form (Eq. 5) for contrast: the gradient at θ_1.
		cfg5 := cfg
		cfg5.DelayedGradient = false
		stale, err := newLearner(h, &cfg5, sp)
		if err != nil {
			t.Fatal(err)
		}
		defer stale.Close()
		learn(stale, segment(1, 0))
		learn(stale, segment(2, 0))

		same := func(a, b []*nn.Param) bool {
			for i := range a {
				for j := range a[i].Value {
					if math.Float32bits(a[i].Value[j]) != math.Float32bits(b[i].Value[j]) {
						return false
					}
				}
			}
			return true
		}
		if !same(gp, wp) {
			t.Errorf("rms %v anneal %v: the update differs from the gradient at θ_{k−1} applied to θ_k", c.rms, c.anneal)
		}
		if same(stale.Agent.Params(), wp) {
			t.Errorf("rms %v anneal %v: the stale-policy gradient gives the same update; the test cannot tell them apart", c.rms, c.anneal)
		}
	}
}
