// Package replay holds experience replay buffers: where actors put
// transitions and learners draw minibatches from, concurrently.
//
// # Buffers
//
// Buffer is the small interface an algorithm needs: Add a Batch of
// transitions, Sample n of them into a caller-owned Sample. Two
// implementations share one preallocated flat storage (observation, action,
// reward, next observation, terminated, truncated; no per-item allocation)
// with FIFO eviction:
//
//   - Uniform draws uniformly with replacement.
//   - Prioritized draws slot i with probability p_i^α / Σ_k p_k^α from a
//     K-ary sum tree (package replay/sumtree) and implements the optional
//     PriorityUpdater interface.
//
// # Importance-sampling weights
//
// Prioritized reports w_i = (N·P(i))^(−β) / max_j w_j, the maximum taken
// over the sampled batch (Schaul et al., 2016, §3.4), so weights lie in
// (0, 1]. β is annealed by the caller with SetBeta.
//
// # Slot generations
//
// Every slot counts its writes. Sample returns, for each transition, its
// slot (Index) and the slot's generation (Gen); UpdatePriorities ignores an
// update whose slot has been overwritten since it was sampled, so a
// learner that is slow to compute TD errors never re-prioritises the wrong
// transition.
//
// # The driving loop
//
//	buf, _ := replay.NewPrioritized(replay.Config{Capacity: 1 << 20, ObsSize: 4})
//	lim, _ := replay.NewRateLimiter(replay.RateLimiterConfig{SamplesPerInsert: 8, MinSizeToSample: 1000, ErrorBuffer: 1000})
//	// actor goroutine
//	lim.AwaitInsert(ctx, b.Len()); buf.Add(&b)
//	// learner goroutine, r := rng.New(seed, "learner/replay", id)
//	var s replay.Sample
//	lim.AwaitSample(ctx, 128); buf.Sample(&s, 128, r)
//	tdErr := learn(&s.Batch, s.Weight)
//	buf.UpdatePriorities(s.Index, s.Gen, absPlusEps(tdErr))
//
// # Concurrency and cost
//
// All buffer methods are safe for concurrent use. Slots are reserved with
// an atomic fetch-add and transition data are copied outside any
// buffer-wide lock, under the lock of a small stripe of slots. Prioritized
// (Locking TwoLock, the default) sets a slot's priority in the same stripe
// critical section as its data, propagates by atomic adds under a tree
// lock that writers share, and searches with no lock; learners never wait
// for actors (see Prioritized). Config.Locking = GlobalLock replaces all
// this with one mutex, the benchmark baseline. No method starts a
// goroutine. Per batch of n: Add and Sample cost O(n·(transition size +
// K·log_K N)); nothing is allocated in steady state.
//
// # Rate limiting
//
// RateLimiter holds a samples-per-insert ratio (Reverb's
// SampleToInsertRatio): AwaitInsert and AwaitSample block, honouring
// context cancellation, and Reconfigure changes the ratio while running.
package replay
