// Package replay holds experience replay buffers: where actors put
// transitions and learners draw minibatches from, concurrently.
//
// # Buffers
//
// Buffer is the small interface an algorithm needs: Add a Batch of
// transitions, Sample n of them into a caller-owned Sample. Two
// implementations share one preallocated flat storage (observation, action,
// reward, next observation, terminated, truncated; no per-item allocation;
// observations optionally bit- or byte-packed, Config.ObsEncoding) with
// FIFO eviction:
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
//
// # Design notes
//
//   - Storage. Preallocated array-of-structs records: each slot is one run of 32-bit
//     words `[obs | next_obs | action | reward | flags]`, plus a generation word. A random
//     read from a buffer bigger than the cache touches 1–2 lines instead of one per field (the
//     first, struct-of-arrays version spent half of `Sample` in 7 cache misses per row).
//     Actions are float32 (a discrete action is exact below 2^24).
//   - Observation encodings. Config.ObsEncoding stores observations one bit a value (binary
//     planes: MinAtar's 10×10×4 pair takes 100 bytes instead of 3,200, a record 112 bytes
//     instead of 3,212) or one byte a value (8-bit pixels), in package sample's encoding, the
//     one observations travel in (`sample.AppendObs`, `sample.DecodeObs`); Sample unpacks
//     them to the same float32 bits. The last Config.ObsFloatTail values of an observation stay
//     float32 (a side value such as offpolicy's n-step discount). Sampling a packed MinAtar
//     buffer is faster, not slower: a row is 2–3 cache lines instead of about 51, and the bits unpack
//     a byte at a time from a table (`BenchmarkSampleMinAtar`). The encoding is a promise by
//     the caller that values fit (offpolicy derives it from the observation space's bounds);
//     a batch that breaks it widens the buffer once (bits → bytes → float32), under every
//     stripe lock, converting each stored transition, rather than failing the run.
//   - Reservation and generations. Slots are reserved with one atomic fetch-add on a
//     position counter; position p lives in slot p mod N with generation p/N + 1, so FIFO
//     eviction and generations come for free.
//   - Stripes. Copies take the `RWMutex` of a stripe (at most 1024 stripes, each on its
//     own cache line, 64 KiB in all so learners' random reads find it in cache), never a
//     buffer-wide lock (a lock-free copy would be a data race for Go's memory model and the
//     race detector). A stripe covers a block of max(16, K) consecutive slots, so a sum-tree
//     group of K sibling leaves is always under one stripe; blocks are dealt round-robin, so
//     two actors writing adjacent reservations use different stripes.
//   - Publishing (TwoLock; departs from the lazy writing of the PAL paper, Zhang,
//     Kuppannagari and Prasanna 2021). Lazy writing hides a slot by
//     setting its priority to 0, copies outside the locks, then sets the priority to the max:
//     three tree writes and, in the first version here, two leaf-lock and one tree-lock round
//     trips per `Add`. Now the stripe lock does the hiding: `Add` copies each slot's data,
//     generation and leaf (the running max^α) in one stripe critical section, then propagates
//     the leaves' deltas by `PropagateShared`. `Sample` descends the inner levels with no
//     lock (`DescendInnerShared`), then, per draw, takes the group's stripe read lock and
//     finishes the search (`LeafInGroup`), copies the data and reads the generation and
//     priority in that one critical section, so a priority is never paired with another
//     transition's data (`TestPriorityMatchesData`, which fails if that check is removed). A
//     draw that lands outside every leaf of its group (a change not yet propagated, or
//     rounding) is drawn again, independently: rejection sampling, exact for the accepted
//     draws.
//   - Learners never wait for actors. With more goroutines than cores, a goroutine that
//     parks on a lock, once woken, waits for a processor that a busy goroutine may hold for a
//     whole 10 ms scheduling slice, and an actor preempted inside a stripe keeps it that long
//     (`go tool trace -pprof=sched` showed 450 ms of 500 ms of scheduling delay behind stripe
//     unlocks, and the learner at 1/100 of its speed). So `Sample` takes stripes with
//     `TryRLock` and treats a stripe held by a writer as "slots in flight": the draw is drawn
//     again (after 8 such draws in a row it waits, since a tiny buffer may be all in flight).
//     `UpdatePriorities` applies the rows whose stripe it gets with `TryLock` first and only
//     then waits (`lockSpin`: poll, then `Gosched`) for the rest.
//   - Two locks. The stripe locks (data, generations, leaves) and `treeMu` (inner levels,
//     sharded; see below). Writers (`Add`, `UpdatePriorities`) hold `treeMu` shared from their first leaf write to
//     the end of their propagation, so they never wait for each other; `Rebuild` (every
//     `RebuildEvery` writes) and `Verify` hold it exclusively, so they never see a leaf whose
//     delta is still on its way up. Searches never take it.
//   - Cache lines, not locks, are the cost on two cores. A learner running on the other
//     core made an actor's own work 4x slower per insert in the profile (the same code, the
//     same work: every write to a line the other core holds is a transfer). So: read-mostly
//     fields (config, storage pointers, tree) sit on other lines than the counters and locks
//     every `Add` writes (`cacheLinePad`); `treeMu` is sharded 8 ways and a writer read-locks
//     the shard named by its pooled scratch (pools are per processor, so two cores rarely
//     share a shard word; `Rebuild`/`Verify` lock all shards in order); the `written` counter
//     stops once the buffer is full (`Len` saturates there), so it is only read afterwards;
//     and a write that changes no leaf (a full buffer refilled at an unchanged maximum, most
//     inserts of the free-running benchmark) skips propagation and the rebuild count, in both
//     variants.
//   - Stale-update protection. `UpdatePriorities` applies an update only if the slot's
//     generation (checked under its stripe lock, where writers change it together with the
//     data and the leaf) still equals the one the sample reported.
//   - IS weights. w_i = (N·P(i))^−β / max_j w_j with the max over the sampled batch
//     (= (min_j P(j)/P(i))^β), as most implementations do; a global max would need a second
//     (min) tree. β is set with `SetBeta` (atomic) so it can be annealed while learners run.
//   - GlobalLock holds one mutex across each whole operation and uses the plain tree
//     operations (the baseline).
//   - Rate limiter. Reverb's SampleToInsertRatio semantics (min size, samples per insert,
//     error buffer). Blocking uses a "closed-and-replaced channel" broadcast so waits can
//     select on `ctx.Done()`; `Reconfigure` and `Close` wake every waiter. A batch is admitted
//     when its first item fits, so the ratio can overshoot by one batch; `Validate` requires
//     `ErrorBuffer ≥ max(1, SamplesPerInsert)` so neither side can deadlock.
//
// # Departures and limits
//
//   - Sampling more transitions than the buffer holds is an error,
//     although sampling is with replacement.
//   - Two writers target the same slot when one is descheduled for a whole lap of the ring
//     while the others write `Capacity` transitions (the `-race` stress test on a loaded
//     machine hit it: a slot held the older data with the newer priority generation). The
//     stripe-locked copy now skips a slot that already holds a newer generation, so the newer
//     transition always wins and data and priority generation agree.
//   - `sync.Pool` holds per-call scratch; under `-race` the pool drops items, so the
//     zero-allocation test is skipped there (it runs in the normal suite).
//   - Two-lock single-thread operations cost more than GlobalLock's (sample ≈ 1.5x, update
//     ≈ 2x: per-row stripe locks and CAS adds); the design trades them for concurrency (see
//     BENCHMARKS.md). The atomic adds make inner sums depend on the interleaving of writers,
//     so two-lock results are reproducible only single-threaded (where both give the same bits);
//     GlobalLock is bit-reproducible under concurrency too.
package replay
