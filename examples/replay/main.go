// Command replay runs the parallel-actors-and-learners loop on a
// prioritized replay buffer for one second: two actor goroutines insert
// CartPole-sized transitions, one learner samples minibatches and feeds
// back new priorities, and a rate limiter holds 4 sampled items per
// inserted item. Run it with `go run ./examples/replay`.
package main

import (
	"context"
	"fmt"
	"log"
	"sync"
	"sync/atomic"
	"time"

	"herd/internal/rng"
	"herd/replay"
)

func main() {
	const seed = 1
	buf, err := replay.NewPrioritized(replay.Config{Capacity: 100_000, ObsSize: 4})
	if err != nil {
		log.Fatal(err)
	}
	lim, err := replay.NewRateLimiter(replay.RateLimiterConfig{SamplesPerInsert: 4, MinSizeToSample: 1000, ErrorBuffer: 2000})
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()

	var inserted, updated atomic.Int64
	var wg sync.WaitGroup
	for a := 0; a < 2; a++ { // actors
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rng.New(seed, "actor/env", a)
			var b replay.Batch
			b.Resize(32, 4, 1)
			for {
				for i := range b.Obs {
					b.Obs[i], b.NextObs[i] = r.Float32(), r.Float32()
				}
				for i := range b.Reward {
					b.Reward[i], b.Action[i] = 1, float32(r.IntN(2))
				}
				if lim.AwaitInsert(ctx, b.Len()) != nil {
					return // deadline: stop
				}
				if err := buf.Add(&b); err != nil {
					log.Fatal(err)
				}
				inserted.Add(int64(b.Len()))
			}
		}()
	}
	wg.Add(1)
	go func() { // learner
		defer wg.Done()
		r := rng.New(seed, "learner/replay", 0)
		var s replay.Sample
		prio := make([]float64, 128)
		for step := 0; ; step++ {
			if lim.AwaitSample(ctx, 128) != nil {
				return
			}
			if err := buf.Sample(&s, 128, r); err != nil {
				log.Fatal(err)
			}
			// A real learner computes TD errors here, weighting the loss
			// by s.Weight; we stand in with random magnitudes.
			for i := range prio {
				prio[i] = r.Float64() + 1e-3
			}
			n, err := buf.UpdatePriorities(s.Index, s.Gen, prio)
			if err != nil {
				log.Fatal(err)
			}
			updated.Add(int64(n))
			_ = buf.SetBeta(min(1, 0.4+float64(step)*1e-4)) // anneal β
		}
	}()
	wg.Wait()
	lim.Close()
	ins, smp := lim.Counts()
	fmt.Printf("inserted %d, sampled %d (%.2f per insert), priorities updated %d, buffer holds %d\n",
		inserted.Load(), smp, float64(smp)/float64(ins), updated.Load(), buf.Len())
}
