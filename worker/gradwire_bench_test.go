package worker

import (
	"context"
	"sync"
	"testing"

	"herd/algo"
	"herd/transport"
)

// benchReducer times one gradient exchange of two learners in one process
// (both goroutines' rounds per op) for a model of n values.
func benchReducer(b *testing.B, n int) {
	ip := transport.NewInproc()
	ctx := context.Background()
	var rs []algo.Reducer
	var gs []*algo.Grad
	for k := range 2 {
		c, err := ip.Collective(ctx, "bench", transport.Options{Learner: k, Learners: 2})
		if err != nil {
			b.Fatal(err)
		}
		rs = append(rs, NewReducer(&LearnerGroup{Collective: c, Learners: 2, Slot: k}))
		// PPO's parts: weights and biases of three layers in the actor
		// and the critic.
		g := &algo.Grad{N: 1}
		for i := range 12 {
			size := 64
			if i%2 == 0 {
				size = n/6 - 64
			}
			g.Parts = append(g.Parts, make([]float32, size))
			g.Has, g.Steps = append(g.Has, 1), append(g.Steps, 1)
		}
		gs = append(gs, g)
	}
	errs := make([]error, 2)
	b.ResetTimer()
	var wg sync.WaitGroup
	for k := range 2 {
		wg.Go(func() {
			for range b.N {
				if errs[k] = rs[k].AverageGrad(ctx, gs[k]); errs[k] != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
}

// PPO's 64-unit CartPole MLP (messages) and its 512-unit one (in place).
func BenchmarkReducer9k(b *testing.B)   { benchReducer(b, 9000) }
func BenchmarkReducer530k(b *testing.B) { benchReducer(b, 530000) }
