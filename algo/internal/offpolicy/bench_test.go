package offpolicy

import (
	"testing"

	"herd/algo"
	"herd/env"
	"herd/internal/rng"
	"herd/rollout"
	"herd/sample"
)

// BenchmarkAssemblerAdd measures the env-worker side of one vector step of
// 16 CartPole-sized envs with 3-step returns (ns per vector step).
func BenchmarkAssemblerAdd(b *testing.B) {
	const n, d = 16, 4
	a, err := NewAssembler(n, 3, 0.99, d, 1)
	if err != nil {
		b.Fatal(err)
	}
	batch := &env.Batch{ObsDim: d, Obs: make([]float32, n*d), Rewards: make([]float32, n), Terminated: make([]bool, n),
		Truncated: make([]bool, n), Infos: make([]env.Info, n), FinalObs: make([]float32, n*d)}
	obs, act := make([]float32, n*d), make([]float32, n)
	var tr sample.Transitions
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		batch.Terminated[i%n] = i%50 == 49
		rollout.ClearTransitions(&tr)
		if err := a.Add(&tr, obs, act, batch); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReplayAddSample measures storing 16 one-step transitions and
// drawing one minibatch of 128 from a prioritized replay with 3-step
// discounts, plus the priority update (ns per round).
func BenchmarkReplayAddSample(b *testing.B) {
	r, err := NewReplay(ReplayConfig{Capacity: 10000, ObsDim: 4, ActDim: 1, NSteps: 3, Gamma: 0.99,
		Prioritized: true, Alpha: 0.6, Beta: 0.4, Eps: 1e-6, BetaSteps: 1e6})
	if err != nil {
		b.Fatal(err)
	}
	tr := sample.NewTransitions(16, 4, 1)
	for i := range tr.Discounts {
		tr.Discounts[i] = 0.97
	}
	for range 100 {
		if err := r.Add(tr); err != nil {
			b.Fatal(err)
		}
	}
	g := rng.New(1, "bench", 0)
	var mb algo.Minibatch
	td := make([]float32, 128)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if err := r.Add(tr); err != nil {
			b.Fatal(err)
		}
		if err := r.Sample(&mb, 128, int64(i), g); err != nil {
			b.Fatal(err)
		}
		if err := r.UpdatePriorities(&mb, td); err != nil {
			b.Fatal(err)
		}
	}
}
