package replay_test

import (
	"fmt"

	"herd/internal/rng"
	"herd/replay"
)

// A DQN-style loop over a prioritized buffer: insert transitions, sample a
// minibatch with importance weights, feed the new |TD errors| back.
func ExamplePrioritized() {
	buf, err := replay.NewPrioritized(replay.Config{Capacity: 1000, ObsSize: 4, Alpha: 0.6, Beta: 0.4})
	if err != nil {
		panic(err)
	}
	// An actor adds a batch of 8 CartPole-sized transitions.
	var b replay.Batch
	b.Resize(8, 4, 1)
	for i := range b.Reward {
		b.Reward[i] = 1
		b.Action[i] = float32(i % 2)
	}
	if err := buf.Add(&b); err != nil {
		panic(err)
	}

	// A learner samples, computes TD errors, and updates priorities.
	r := rng.New(42, "learner/replay", 0)
	var s replay.Sample
	if err := buf.Sample(&s, 4, r); err != nil {
		panic(err)
	}
	tdErr := []float64{0.5, 2, 0.1, 1}
	n, err := buf.UpdatePriorities(s.Index, s.Gen, tdErr)
	fmt.Println("sampled", s.Len(), "updated", n, "err", err)

	// New transitions enter at the running maximum priority (2 here),
	// so the buffer still holds 9 after one more.
	b.Resize(1, 4, 1)
	_ = buf.Add(&b)
	fmt.Println("len", buf.Len())

	// A stale update (the slot's generation has moved on) is ignored.
	n, _ = buf.UpdatePriorities([]int{0}, []uint64{7}, []float64{3})
	fmt.Println("stale updates applied:", n)
	// Output:
	// sampled 4 updated 4 err <nil>
	// len 9
	// stale updates applied: 0
}
