// Package pal is the parallel actors and learners executor of the PAL
// paper (Zhang, Kuppannagari and Prasanna, 2021, "Parallel Actors and
// Learners: A Framework for Generating Scalable RL Implementations"),
// for algorithms with a transition learner (algo.CanTransitionLearner:
// DQN, SAC, TD3, DDPG; Executor states it):
//
//	runtime: {executor: pal, actors: N, learners: M, learner_mode: async|sync, refresh_every: k}
//
// Each of the N actors is an env worker (its own num_envs envs, reset
// with its own seeds, and a sampler drawing from rng.New(seed,
// "env-worker", i)) with an inline copy of the policy (algo.PolicyNet).
// Actors assemble transitions and add them to the one shared replay
// memory (replay.Uniform or replay.Prioritized behind the algorithm's
// Replay; each goroutine uses its own fork of the Replay's workspaces over
// the same concurrency-safe buffer). The buffer is replay.TwoLock unless
// runtime.replay_locking is global (replay.GlobalLock, one mutex).
// TwoLock is not the paper's lazy writing: it keeps the paper's two kinds
// of lock (per-slot-block stripe locks for data and sum-tree leaves, and a
// tree lock writers share for the inner levels), but instead of hiding a
// slot by zeroing its priority and copying its data outside the locks, an
// actor writes data and leaf in one stripe critical section, and learners
// reject draws on a stripe being written (replay/doc.go). On one
// goroutine both give the same bits, so the choice is speed alone
// (BenchmarkLocking measures it inside PAL). Every k of its env steps an actor
// looks at the parameter service (weights.Store) and copies the newest
// version if it changed; the store hands out immutable versions behind an
// atomic pointer, so a copy is never torn.
//
// One learner (M = 1, the default) runs
// algo.TransitionLearner.Learn(ctx, rb, prev, step) as
// the global env-step counter advances: Learn runs exactly the updates
// due for env steps (prev, step] in the algorithm's own schedule (DQN:
// gradient_steps per train_frequency; SAC, TD3, DDPG: one per step), so
// the replay ratio — U env steps per update — is the single-process
// algorithm's by construction, however the steps are grouped. It publishes
// a new version every publish_every updates.
//
// The rate limiter is a counter under one mutex and a sync.Cond: actors
// reserve env steps (never beyond the run's total) and park while they
// are max_lag steps or more ahead of the steps whose updates the learner
// has run; the learner parks while no new steps are committed. Nobody
// spins. Cancelling the context wakes every parked goroutine; Train
// returns only after all of them have stopped.
//
// Staleness. The scheme is asynchronous, and a run is not reproducible
// bit for bit (the order in which actors' transitions reach the buffer
// and the moment a version is picked up depend on the scheduler). What is
// bounded: (1) an actor acts with a policy at most refresh_every of its
// steps older than the newest published version, which itself is at most
// publish_every updates behind the learner; (2) the learner runs the
// updates due at step s with at most max_lag + N·num_envs env steps of
// experience beyond s already in the buffer, and never before the
// transitions of steps ≤ s are in it; (3) the ε or noise schedule of an
// actor is evaluated at the global step it reserved. The single-process
// loop is the limit refresh_every = publish_every = 1 with N = 1 and a
// lag of one step.
//
// Several learners (M > 1). The algorithms' learners are
// algo.SplitLearners: an update is cut into a gradient step (Grad: draw a
// minibatch with the learner's own streams — the algorithm's stream names
// with the learner's slot id 0 … M−1 — compute the gradients into a buffer
// the caller owns, feed TD errors back as priorities) and an apply step
// (Apply: optimizer steps, target-network updates, the update counter).
// Updates keyed to env steps rather than to updates — DQN's target syncs —
// are taken by algo.Advancer once the updates due for those env steps are
// applied, so they are one learner's in number and step also when
// target_network_frequency is not a multiple of train_frequency
// (TestDQNTargetSyncsAsLocal).
// The M gradient learners are goroutines, each with its own copy of the
// networks, its own fork of the replay and one gradient buffer. The
// parameter service runs on the goroutine that called Train: it turns the
// committed env steps into the algorithm's schedule of updates (Due:
// tickets numbered 1, 2, …, each at the env step it is due), hands them out
// with the state to compute them at (every network a gradient reads, an
// immutable weights.Version), applies the gradients to its own learner,
// and publishes the new state, and every publish_every updates the
// policy for the actors. An actor-critic's update comes in phases
// (algo.Phaser): TD3's and DDPG's actor update is the critic phase, then
// the actor phase on the same minibatch at the critics the critic step
// left (Fujimoto et al. 2018 and Lillicrap et al. 2016, Algorithm 1);
// SAC's is the critic phase, then policy_frequency actor-and-α phases,
// each at the parameters the one before left. The service applies each
// phase before it hands out the next, so M learners compute the update
// one learner computes: SAC's, TD3's and DDPG's Learn is these phases of
// Grad then Apply on the learner itself (one update, written once), and
// for DQN Grad then Apply is Learn bit for bit (algo/all
// TestOffPolicySplitLearners). M learners that draw the same minibatches
// end with Learn's weights bit for bit (TestSameWeightsAsLearn), and
// TD3's actor steps right after every policy_frequency-th critic step in
// both modes (TestActorEveryPolicyFrequency).
//
// learner_mode: async (the default). Update k goes to learner (k−1) mod M
// and the service applies the gradients strictly in update order, so the
// apply order is round-robin by learner id and the same in every run. A
// learner has one gradient buffer: it is handed update k only once its
// update k−M is applied, with the newest state at that moment, which has
// at least k−M updates applied; update k is applied on top of k−1.
// Staleness bound: a gradient is computed at most M−1 updates before the
// state it is applied to (0 for M = 1). An update's later phases (the
// actor's) go to the learner that computed its critic phase, which holds
// the minibatch, at the state right after that phase's apply: they are
// never stale, and the other learners go on meanwhile. How stale each one is within that
// bound depends on which learner finishes first, so it differs between
// runs (Stats.MaxStale and MeanStale report it). Env steps are consumed (releasing the actors) once all their
// updates are applied, as with one learner.
//
// learner_mode: sync (data-parallel). Every update of the algorithm's
// schedule is one round: the M learners compute its gradient side by side
// at the same state, each on its share of the minibatch drawn from its own
// slot's stream — B/M rows each with sync_batch: split (the default; B must
// be a multiple of M), or B rows each with sync_batch: full (an effective
// batch of M·B, asked for explicitly) — and the service sums them in
// learner-id order, divides by M and applies the mean once, as one update
// (phase by phase: the critics' mean is applied before the learners
// compute the actor's).
// So the updates, the critic and actor optimizer steps, the target updates
// and every schedule keyed to the update or env step (TD3's and DDPG's
// policy delay, SAC's delayed actor and target frequency, DQN's target
// copies, ε, learning-rate annealing, prioritized replay's β) see exactly
// the counts of executor: local (TestSameCountsAsLocal counts them for
// DQN, SAC, TD3 and DDPG at M = 1, 2, 4 in both modes). No gradient is
// stale. Where it departs from one learner on B rows: each share is drawn
// independently (with replacement, as one minibatch is), and under
// prioritized replay each share normalises its importance weights by its
// own largest weight. Env steps are consumed once their updates are
// applied.
//
// Either way, the updates made are the algorithm's schedule, so the
// replay ratio is the single-process one for every M (TestReplayRatio,
// TestLearners).
//
// Ape-X initial priorities (dqn: initial_priorities: actor, with
// prioritized replay): when the pieces have a Prioritizer, each actor sets
// the priorities of the transitions it just assembled, |δ| + ε under its
// own policy copy, before adding them, so they enter the shared replay at
// that priority rather than the running maximum; the learner spends no
// time on it.
//
// Options.NoLearn runs the actors alone, unthrottled: herd tune measures
// actor throughput f_a(x) with it. MeasureLearners measures f_l(x) on the
// same learner side the executor runs (x learners, the service, the rate
// limiter), fed by a stand-in for the actors that commits steps with no
// env.
//
// # Checkpoints
//
// A run under `herd train` saves its learner, its replay, the actors'
// sampler streams and its global step at a quiescent point
// (checkpoint.go): the learner holds the actors' reservations, waits for
// the steps handed out to be committed and learns up to them. With M > 1
// learners the parameter service does so: it runs every update due up to
// the committed step (nothing pending, no gradient in flight), saves its
// own learner and each gradient learner's streams (slot sections); an
// interrupted run's service applies the updates already handed out before
// the checkpoint of the interruption. Every actor is then between two
// steps, so its envs are saved too (each env's state, the next
// observations, the pending n-step steps, TD3's OU noise) and continue
// their episodes on resume; envs whose state cannot be saved start new
// episodes instead (docs/guide/resume.md).
//
// # Design notes
//
//   - Pieces, composed concurrently. `run/pal.Train` builds N actors (env vector of num_envs envs
//     with reset seeds seed + i·num_envs, sampler stream `rng.New(seed, "env-worker", i)`, assembler,
//     own PolicyNet) and one `TransitionLearner`. The replay is the algorithm's `offpolicy.Replay`;
//     it is single-goroutine only in its workspaces, so it now implements `algo.ForkReplay`: `Fork()`
//     returns a Replay over the same buffer with its own workspaces (one per actor, one for
//     the learner). Configs expose `algo.TransitionShape` (num_envs, U); learners expose `Model()`.
//   - Rate limiter (`limiter`): one mutex + `sync.Cond`. Actors `reserve` n env steps (never past
//     the run's total; park while `reserved − consumed ≥ max_lag`), step, add to the replay, then
//     `commit`. The learner parks until `committed` moves, then calls `Learn(ctx, rb, prev, committed)`:
//     the learner's schedule is in env steps, so the number of updates is exactly the local loop's
//     (tested: `TestReplayRatio` counts updates for DQN, TD3, SAC, DDPG under 1, 3 and 8 actors).
//     Cancellation: `context.AfterFunc` wakes every parked goroutine; `TestCancel` checks no goroutine
//     is left.
//   - Parameter service: `weights.Store` (immutable versions behind an atomic pointer; Publish
//     refuses non-advancing numbers), so a version is never torn (`weights.TestStoreNeverTorn`).
//   - M > 1 learners (`learners: M`, `learner_mode: async|sync`; `--set runtime.learners=2` on
//     the command line). `algo.SplitLearner` cuts each off-policy learner's update into `Grad`
//     (minibatch from the slot's own streams, e.g. `rng.New(seed, "dqn/replay", slot)`, gradients into
//     a caller-owned `algo.Grad`, priorities) and `Apply` (optimizer steps, targets, counter), plus
//     `Due` (the schedule as numbered tickets) and `State`/`SetState` (every network a gradient reads,
//     as an immutable `weights.Version`), in phases for the actor-critics (`algo.Phaser`). SAC's, TD3's
//     and DDPG's `Learn` is Grad then Apply phase by phase (the sha256 fixtures hold); for DQN,
//     Grad+Apply on one learner is Learn bit for bit. The service (`run/pal/learners.go`) hands update
//     k to learner (k−1) mod M and applies in update order (async; staleness ≤ M−1 updates), or runs
//     rounds of M gradients at one state averaged in learner-id order (sync; one round counts M
//     updates, so the replay ratio in samples per transition is the single-process one). Tests:
//     `TestLearners` (M = 2, 3, both modes, all four algorithms: exact update and apply counts,
//     staleness ≤ M−1), `TestServiceAsyncOrder` / `TestServiceSyncRounds` (fake learners finishing in
//     shuffled order: round-robin apply order, staleness bound, averaging in learner-id order),
//     `TestCancel` (goroutine count), `TestRace` (8 actors + 4 learners, under `-race`).
//   - Not done: `step_time` under pal. A PAL run is not
//     bit-reproducible (actors interleave, async gradients' staleness); the local executor stays the
//     reproducible one.
//   - Ape-X initial priorities: `algo.OffPolicy.NewPrioritizer` (set by DQN under
//     `initial_priorities: actor`, which needs `prioritized: true`) builds an `algo.Prioritizer`;
//     actors call `Prioritize(tr, policy)` on each assembled batch, setting `Transitions.Priorities`
//     to |δ| + ε with δ = r + γ^m(1−d) max Q(s′,·) − Q(s,a) under the actor's copy; `offpolicy.Replay.Add`
//     stores given priorities with `replay.Prioritized.AddWithPriorities` (NaN, negative, infinite,
//     or any on uniform replay: an error naming the row).
//   - herd tune: `pal.MeasureActors` (N actors, `NoLearn`: no learner, no limiter) gives f_a(x);
//     `pal.MeasureLearners` runs the executor's learner side with x learners (the config's
//     learner_mode) on a replay pre-filled by 4096 actor steps, fed through the rate limiter by a
//     stand-in that commits steps without envs, for f_l(x). `tune.Fit`, `tune.Choose`, `tune.Plot` do
//     the rest; the written config takes the choice, M > 1 included, keeping the file's other runtime
//     keys.
package pal
