// Command replay runs the parallel-actors-and-learners loop on a
// prioritized replay buffer for one second: two actor goroutines insert
// CartPole-sized transitions, one learner samples minibatches and feeds
// back new priorities, and a rate limiter holds 4 sampled items per
// inserted item. Run it with `go run ./examples/replay`.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"herd/internal/rng"
	"herd/replay"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := run(ctx, os.Stdout, 1); err != nil {
		log.Fatal(err)
	}
}

// stats is what one run did, for the example's test.
type stats struct {
	Inserted, Sampled, Updated int64
	Held                       int
}

// run drives the actors and the learner until ctx ends, then prints one
// summary line. The first error from any goroutine stops them all.
func run(ctx context.Context, w io.Writer, seed uint64) (stats, error) {
	buf, err := replay.NewPrioritized(replay.Config{Capacity: 100_000, ObsSize: 4})
	if err != nil {
		return stats{}, err
	}
	lim, err := replay.NewRateLimiter(replay.RateLimiterConfig{SamplesPerInsert: 4, MinSizeToSample: 1000, ErrorBuffer: 2000})
	if err != nil {
		return stats{}, err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

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
					cancel(err)
					return
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
				cancel(err)
				return
			}
			// A real learner computes TD errors here, weighting the loss
			// by s.Weight; we stand in with random magnitudes.
			for i := range prio {
				prio[i] = r.Float64() + 1e-3
			}
			n, err := buf.UpdatePriorities(s.Index, s.Gen, prio)
			if err != nil {
				cancel(err)
				return
			}
			updated.Add(int64(n))
			_ = buf.SetBeta(min(1, 0.4+float64(step)*1e-4)) // anneal β
		}
	}()
	wg.Wait()
	lim.Close()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		return stats{}, err
	}
	ins, smp := lim.Counts()
	st := stats{Inserted: inserted.Load(), Sampled: smp, Updated: updated.Load(), Held: buf.Len()}
	fmt.Fprintf(w, "inserted %d, sampled %d (%.2f per insert), priorities updated %d, buffer holds %d\n",
		st.Inserted, st.Sampled, float64(smp)/float64(ins), st.Updated, st.Held)
	return st, nil
}
