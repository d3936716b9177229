// Package pal is the parallel actors and learners executor (seed 000,
// "PAL"), for the off-policy algorithms (DQN, SAC, TD3, DDPG):
//
//	runtime: {executor: pal, actors: N, learners: 1, refresh_every: k}
//
// Each of the N actors is an env worker (its own num_envs envs, reset
// with its own seeds, and a sampler drawing from rng.New(seed,
// "env-worker", i)) with an inline copy of the policy (algo.PolicyNet).
// Actors assemble transitions and add them to the one shared replay
// memory (replay.Uniform or replay.Prioritized behind the algorithm's
// Replay; each goroutine uses its own fork of the Replay's workspaces over
// the same concurrency-safe buffer). Every k of its env steps an actor
// looks at the parameter service (weights.Store) and copies the newest
// version if it changed; the store hands out immutable versions behind an
// atomic pointer, so a copy is never torn.
//
// The learner runs algo.TransitionLearner.Learn(ctx, rb, prev, step) as
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
// Several learners (M > 1) are rejected with a config error: the
// algorithms' learners compute and apply their gradients in one call, and
// the synchronous variant (M gradients on M minibatches, averaged in a
// fixed order, applied once) needs them split into a gradient step and an
// apply step.
//
// Ape-X initial priorities (dqn: initial_priorities: actor, with
// prioritized replay): when the pieces have a Prioritizer, each actor sets
// the priorities of the transitions it just assembled, |δ| + ε under its
// own policy copy, before adding them, so they enter the shared replay at
// that priority rather than the running maximum; the learner spends no
// time on it.
//
// Options.NoLearn runs the actors alone, unthrottled: herd tune measures
// actor throughput f_a(x) with it.
package pal
