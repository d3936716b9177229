package dqn

import (
	"testing"

	"herd/algo"
	"herd/env"
	"herd/internal/rng"
	"herd/sample"
)

// BenchmarkUpdate times one training round of configs/dqn-cartpole.yaml's
// learner (an update at batch 128 on 4-120-84-2 with its target network
// and Adam) plus the ten greedy batch-1 forwards of the env steps between
// two rounds, on a full replay of random CartPole-sized transitions, with
// the twin worker (par) and without (solo).
func BenchmarkUpdate(b *testing.B) {
	for _, par := range []bool{true, false} {
		name := "solo"
		if par {
			name = "par"
		}
		b.Run(name, func(b *testing.B) {
			cfg := NewConfig()
			cfg.Parallel = par
			e, err := env.Make("CartPole-v1")
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			p, err := newPieces(algo.Header{Env: "CartPole-v1", Seed: 1, Steps: 500000}, cfg, algo.SpacesOf(e))
			if err != nil {
				b.Fatal(err)
			}
			l, err := p.newLearner()
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			rb, err := p.newReplay()
			if err != nil {
				b.Fatal(err)
			}
			r := rng.New(1, "test/bench", 0)
			tr := sample.NewTransitions(cfg.BufferSize, 4, 1)
			for i := range tr.Obs {
				tr.Obs[i], tr.NextObs[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
			}
			for i := range cfg.BufferSize {
				tr.Actions[i], tr.Rewards[i], tr.Discounts[i] = float32(i%2), 1, float32(cfg.Gamma)
			}
			if err := rb.Add(tr); err != nil {
				b.Fatal(err)
			}
			obs := make([]float32, 4)
			act := make([]float32, 1)
			for i := 0; b.Loop(); i++ {
				for j := range 10 {
					copy(obs, tr.Obs[4*((i*10+j)%cfg.BufferSize):])
					l.agent.Act(act, obs)
				}
				if _, _, err := l.train(rb, int64(20000+10*i)); err != nil {
					b.Fatal(err)
				}
			}
			s := l.par.Stats()
			b.ReportMetric(float64(s.Worker)/float64(max(1, s.Worker+s.Stolen+s.Solo)), "on-worker")
		})
	}
}
