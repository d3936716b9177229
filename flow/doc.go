// Package flow writes reinforcement-learning algorithms as dataflow plans:
// short functions that build lazy iterators over a set of workers and
// return a stream of reports; pulling the stream runs the algorithm
// (Liang et al. 2021, "RLlib Flow: Distributed Reinforcement Learning is a
// Dataflow Problem"). The algorithm reads top to bottom in a few lines,
// and the machinery — actors, barriers, back-pressure, weight messages —
// lives in the operators.
//
// # An example: A3C
//
// Workers compute gradients on their own rollouts; the driver applies them
// as they arrive and sends the new weights back. AsyncPlan builds this
// for package a3c's config (its algo.AsyncPlan asks for gradients);
// written as a Planner of one's own (TrainPlan), it reads:
//
//	func (c *Config) Plan(r *flow.Run) (flow.Iter[flow.Report], error) {
//		workers, err := flow.RolloutWorkers(r, c.NumEnvs, c.NumSteps, c.Gamma)
//		if err != nil {
//			return nil, err
//		}
//		grads, err := flow.GatherAsyncLag(flow.ParForEach(flow.ParallelRollouts(workers), flow.ComputeGradients(workers)), 1, c.MaxPolicyLag)
//		if err != nil {
//			return nil, err
//		}
//		learner, err := flow.SegmentLearner(r)
//		if err != nil {
//			return nil, err
//		}
//		return flow.StandardMetricsReporting(r, flow.ForEach(grads, flow.ApplyGradients(workers, learner))), nil
//	}
//
// ParallelRollouts is a ParIter: one shard per worker, each producing
// segments on the worker's own goroutine (an Actor). ParForEach adds work
// that runs there too, so the gradients are computed in parallel.
// GatherAsyncLag turns the shards into one sequential Iter, taking items
// as they come within a bound on their lag; ForEach then runs on the
// consumer's goroutine, here the driver's. Nothing runs until Train pulls
// the last iterator.
//
// # The model
//
//   - Iter[T] is a lazy sequential stream (an iter.Seq2 of items and
//     errors): ForEach, Filter, Flatten, Combine (concatenate to a size),
//     Select (by policy id).
//   - ParIter[T] is a lazy stream sharded over source actors: ParForEach
//     runs on each shard's actor. A shard's Next returns ErrEnd when it has
//     nothing more.
//   - GatherSync(par) yields one item from every shard per round, as a
//     slice: a barrier. Requests for a round go out only when the consumer
//     pulls it, so the actors are idle between rounds and a message sent
//     after a round (UpdateWeights) is seen before the next one: every
//     segment of round k+1 carries the version published after round k.
//     GatherSyncAhead(par, n) keeps n rounds in flight instead: the shards
//     make the next rounds while the consumer learns on this one, and
//     round k+n carries the version published after round k — a fixed
//     lag of n − 1, so still the same bits for any number of shards
//     (runtime.num_async in the A2C and PPO plans).
//   - GatherAsync(par, n) yields items as they arrive, with at most n
//     requests in flight per shard; it never holds more than n × shards
//     items the consumer has not taken. A shard sees a message before any
//     item requested after it, but an item of a slow shard can wait
//     behind any number of the other shards' items: with a learner step
//     and a weights broadcast per item, its lag in versions has no bound.
//     GatherAsyncLag(par, n, m) bounds it: no item comes after more than m others were taken
//     since it was requested (it waits for the oldest request first when
//     taking another would break that), so with one update per item the
//     lag is at most m versions; m ≥ n × shards − 1, the lag of the first
//     requests, and m = 0 means that least bound, where items come in
//     request order. A3C and IMPALA use it (max_policy_lag) and report
//     charts/policy_lag_max; Ape-X's store uses GatherAsync (its workers'
//     weights follow SyncEvery, not the items).
//   - Split(it, n, bound) duplicates a stream for concurrent consumers,
//     each copy buffering at most bound items; the lagging consumer is
//     preferred (the leader waits).
//   - UnionRoundRobin, UnionWeighted (a fixed ratio, e.g. Ape-X's stored
//     to replayed batches) and UnionAsync (inputs on goroutines of their
//     own) merge streams.
//   - Messages: Actor.Send queues a function on a shard's actor (no reply),
//     Actor.Call awaits its error. Both follow the ordering above.
//
// # Operators for RL
//
// RolloutWorkers, ParallelRollouts, ConcatBatches, SegmentLearner,
// TrainOneStep, ComputeGradients and ApplyGradients, Workers.UpdateWeights,
// StandardMetricsReporting (into metrics.csv, summary.json and the
// progress bar) serve the on-policy pieces (algo.Pieces); OffPolicyWorkers,
// OffPolicyRollouts, TransitionLearner, StoreToReplay and Replay the
// off-policy ones (OffPolicySlotWorkers and ConcatExperience for a
// synchronous plan), where ReplayWorkers.SyncEvery makes each worker copy the
// learner's newest weights every n of its env steps instead of receiving
// every update (Ape-X's actors). Train (`runtime: {executor: flow}`) runs
// the plan PlanOf picks: a Planner of the caller's (TrainPlan); AsyncPlan
// for a config that declares an asynchronous plan (algo.AsyncPlanner, its
// Spec algo.CanPlan: A3C's gradients, IMPALA's segments), which the local
// executor also runs in-process (WithTrain: such an algorithm has no Train
// of its own); SyncPlan for a segment learner (A2C, PPO); ReplayPlan for a
// transition learner (DQN, SAC, TD3, DDPG); ApeXPlan when the run asks for
// actor priorities (DQN's initial_priorities: actor). So an algorithm
// package needs no flow code, and compiles without it.
//
// A rollout worker's policy copy acts on the same envs throughout, so a
// recurrent policy (rollout.StateKeeper: IMPALA's recurrent: core) keeps
// each of its envs' states there, zeroed where an episode ends, and each
// segment records the states its envs started from (Segment.State) for
// the learner to re-run the sequences from. ConcatBatches joins the
// states with the segments, so SyncPlan (PPO's and A2C's recurrent:
// core) and an algorithm's own plan run with any policy; the off-policy
// operators do not carry the states, so the flow executor runs the
// replay plans only for a stateless policy (Executor's needs).
//
// # Determinism
//
// For rollout workers (RolloutWorkers) and slot workers
// (OffPolicySlotWorkers) randomness belongs to env slots, never to
// workers: slot i resets from (seed, "flow/env", i) and samples from
// (seed, "env-worker", i) (a slot worker's slot also has an n-step
// assembler of its own), and a worker's policy rows do not depend on how
// many rows share a batch. A plan over them made only of synchronous
// operators (GatherSync, GatherSyncAhead, ConcatBatches,
// ConcatExperience, round-robin or weighted Union) therefore gives the
// same parameters for 1, 2 or 4 workers: SyncPlan and ReplayPlan
// (TestSyncPlanSameBitsForAnyWorkers, TestDQNPlans). Replay workers
// (OffPolicyWorkers: Ape-X) each own num_envs envs and streams of worker
// k, so their number changes the data. Asynchronous operators trade
// determinism for throughput, except GatherAsyncLag at its least bound:
// items come in request order (the first requests, made together, in the
// order they were made) and rollout workers claim the budget when an item
// is requested (Shard.Claim), so A3C's and IMPALA's default plans give the
// same bits for a seed and a number of workers.
//
// # Checkpoints
//
// With Runtime.Checkpoints (`herd train --resume`), the operators of a
// plan register their state with the Run (checkpoint.go): the learner
// (algo.LearnerCheckpoint; an off-policy learner with its replay,
// through algo.OffPolicy.Checkpoint), each rollout worker (its envs,
// sampler streams, observations, a recurrent policy's env states, weights
// version and counters, saved on its actor after everything sent to it),
// each replay worker (the same, with each slot's sampler state and
// n-step accumulator; an Ape-X worker's over its envs), each gather (the
// items requested and not yet yielded, waited for, and the order it takes
// them in) and a replay plan's Ledger. The Run saves them after a report
// when one is due, on the caller's cancellation (the plan runs under a
// context of its own meanwhile, so an update or a segment is never cut)
// and at the end, and restores them before the plan is pulled: a
// deterministic plan continues to the same bits. A part may be whole only
// between some reports (the Ledger: not between a store item and its
// updates); once a checkpoint is wanted, every part is asked after each
// report and the checkpoint waits for the report after which all are.
// ApeXPlan's sub-flows run side by side, so asking also holds its store
// sub-flow between items (Ledger.rest, with an empty report to say so)
// until the replay sub-flow has learned every stored step and the
// checkpoint is taken: a quiescent point, continued from but not to the
// same bits (its actors act freely). Envs that cannot save their state
// (env.ErrNoSnapshot) are left out, with what depends on them (their
// observations, recurrent state, pending n-step steps): a resumed worker
// resets them with seeds of the resumption (algo.RestartSeed) and the run
// counts them (Checkpoints.RestartEnvs, summary.json envs_restarted), as
// the local executor does. Workers over a transport and plans of the
// caller's (TrainPlan) register no state, so their runs write no
// checkpoints (Checkpoints.Disable says why).
//
// # Budget and accounting
//
// Workers claim env steps from the run's budget before each segment and
// end (ErrEnd) when it is spent; a synchronous plan rounds the budget down
// to whole rounds (Run.SetBudget), and its workers' n-th items then run
// when round n fits, whatever order they claim in. Every segment a worker made is yielded
// and learned: streams end only when all shards have ended, and a round
// that some shards cannot complete is an error (ErrUneven), never a silent
// drop.
//
// # Failures
//
// An error from any branch ends the plan with that error: Train cancels
// the run's context as soon as the error reaches it, before the stream
// unwinds, so a branch still waiting (UnionAsync's other input, a gather
// waiting on a worker) stops; and a replay sub-flow that fails releases a
// store sub-flow waiting on its Ledger's lag bound also when the plan is
// pulled without Train.
//
// # Transports and concurrency
//
// A plan never names its transport. With runtime.transport inproc
// (default) workers are goroutines in this process. With nats, each worker
// serves its actor over a transport.CallStream (NATS request-reply, on an
// embedded server unless runtime.nats_url names one) and the driver keeps
// a proxy per worker: the shard's Actor, whose functions make one
// numbered call at a time. So the order of a shard's items and messages is
// the call order (the barrier holds as in-process), and a call repeated
// after a lost reply is answered from the worker's memory, never run twice
// (dist/duplicates counts them). The first call builds the worker from the
// run's config (ServeWorker), so worker processes need nothing else:
// herd train hosts them on goroutines with connections of their own,
// herd launch in env worker processes, with TrainServed as the driver.
// The budget, the schedules' steps and ParForEach's functions stay with
// the driver: a Go closure cannot travel, so ComputeGradients runs on the
// driver's proxy goroutines (in parallel) while the worker processes step
// the envs. Weights travel inline with the weights call (a rollout
// worker's with its next segment call: one round trip per round);
// segments and transitions in package sample's encoding. A synchronous plan gives the
// same bits on either transport (TestSyncPlanSameBitsForAnyWorkers).
//
// # Restarts
//
// A worker served elsewhere may die and be started again (herd launch's
// supervisor restarts a killed env worker process in the same slot, within
// its restart budget). Its proxy notices the loss when a call ends without
// a reply: another process registered for the worker (TrainServed's
// whoServes, checked every second while a call waits), the new process
// refused the call's number (its memory is empty), or no reply came within
// callDeadline (5 min). It then rejoins the worker: an init call numbered 1
// again, with the next start number, which draws the new start's action
// samples and env seeds from streams of its own ("env-worker/<start>",
// "flow/env/<start>"), never the first start's again, and with the env
// steps its schedules had reached; then the last weights it was sent;
// then the lost call again. The lost call's reply never arrived, so
// nothing it made is learned, and its env steps, claimed by the driver,
// are made by the new start: the run reports every step of its budget
// once. The new start resets its envs, so episodes running in the lost
// one are not reported; a replay worker also loses its unfinished n-step
// transitions. dist/restarts counts the rejoins, dist/reissued the calls
// sent again. Without an answer from a new start within rejoinWait (2
// min) the run fails. Under GatherAsync the other workers' items keep
// coming meanwhile and the lost request is issued again to the new start;
// under GatherSync the round waits for it. A synchronous plan keeps its
// order of rounds and its step count, but not its bits: from the round
// the new start rejoins in, that worker's samples come from fresh
// episodes, so the parameters differ from those of a run without the
// restart (same seed, same workers). The ids of what the driver receives are the
// worker, its start and the call number; a call repeated after a lost
// reply is answered from the worker's memory (dist/duplicates), so no item
// is learned twice.
//
// Each Actor owns one goroutine, stopped by Train when the run ends (after
// its context is cancelled). Iterators run on the goroutine that pulls
// them, except UnionAsync's inputs. Operators wait by parking on channels
// or condition variables, never by spinning.
package flow
