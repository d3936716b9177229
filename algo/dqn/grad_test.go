package dqn

import (
	"fmt"
	"math"
	"testing"

	"herd/algo"
	"herd/algo/internal/learntest"
	"herd/env"
	"herd/internal/rng"
	"herd/sample"
)

// TestTDLossGradient checks DQN's TD loss with prioritized-replay weights,
//
//	L = mean_i w_i·ℓ(Q(s_i, a_i; θ) − y_i),   ℓ = d² (mse) or Huber(δ = 1),
//
// as the learner wires it (gather of the taken actions, IS weights, scatter
// back to the Q-value matrix): dL/dQ(s, ·) against central differences of
// a float64 reference, on a minibatch whose weights are not all 1.
func TestTDLossGradient(t *testing.T) {
	for _, loss := range []string{"mse", "huber"} {
		t.Run(loss, func(t *testing.T) {
			cfg := NewConfig()
			cfg.BatchSize, cfg.NetArch, cfg.Prioritized, cfg.Loss = 8, []int{8}, true, loss
			e, err := env.Make("CartPole-v1")
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			p, err := newPieces(algo.Header{Env: "CartPole-v1", Seed: 1, Steps: 1000}, cfg, algo.SpacesOf(e))
			if err != nil {
				t.Fatal(err)
			}
			l, err := p.newLearner()
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			rb, err := p.newReplay()
			if err != nil {
				t.Fatal(err)
			}
			r := rng.New(1, "test/td", 0)
			tr := sample.NewTransitions(64, 4, 1)
			for i := range tr.Obs {
				tr.Obs[i], tr.NextObs[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
			}
			for i := range 64 {
				tr.Actions[i], tr.Rewards[i], tr.Discounts[i] = float32(i%2), float32(r.NormFloat64()), float32(cfg.Gamma)
			}
			if err := rb.Add(tr); err != nil {
				t.Fatal(err)
			}
			// Uneven priorities, so the importance weights differ.
			mb := &l.mb
			if err := rb.Sample(mb, 8, 500, r); err != nil {
				t.Fatal(err)
			}
			td := make([]float32, 8)
			for i := range td {
				td[i] = float32(i * i)
			}
			if err := rb.UpdatePriorities(mb, td); err != nil {
				t.Fatal(err)
			}
			if err := rb.Sample(mb, 8, 500, r); err != nil {
				t.Fatal(err)
			}
			uneven := false
			for _, w := range mb.Weights {
				uneven = uneven || w != mb.Weights[0]
			}
			if !uneven {
				t.Fatalf("importance weights %v are all equal; the test would not see them", mb.Weights)
			}
			y := make([]float32, 8)
			for i := range y {
				l.bActions[i] = int(mb.Actions[i])
				y[i] = float32(3 * r.NormFloat64())
			}
			got := l.tdGrad(mb, y)

			k := p.actions.N
			q := learntest.To64(l.q.Forward(mb.Obs, 8))
			ref := func() float64 {
				var s float64
				for i := range 8 {
					d := q[i*k+l.bActions[i]] - float64(y[i])
					ell := d * d
					if loss == "huber" {
						if math.Abs(d) <= 1 {
							ell = 0.5 * d * d
						} else {
							ell = math.Abs(d) - 0.5
						}
					}
					s += float64(mb.Weights[i]) * ell
				}
				return s / 8
			}
			if d := math.Abs(ref() - float64(got)); d > 1e-5*max(1, math.Abs(ref())) {
				t.Errorf("loss %v, reference %v", got, ref())
			}
			learntest.CheckGrad(t, fmt.Sprintf("%s: dL/dQ(s, ·)", loss), l.dQ, learntest.NumGrad(q, ref))
		})
	}
}
