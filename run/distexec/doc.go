// Package distexec is the `dist` executor: an on-policy algorithm's pieces
// run as env workers, policy workers (or none: inline inference) and a
// learner (package worker)
// joined only by package transport's streams, inside one process, over either
// the in-process twin or NATS (an embedded server on loopback, or an
// external one), every role on its own connection as if it were its own
// process.
//
//	runtime:
//	  executor: dist
//	  env_workers: 2      # E env workers, each stepping num_envs envs (default 1)
//	  policy_workers: 1   # P policy workers (default 1)
//	  inference: inline   # policy_workers (default) or inline: env workers act with their own copies, no policy workers
//	  transport: nats     # inproc (default) or nats
//	  nats_url: ""        # an external server or cluster; empty: embedded on 127.0.0.1
//	  max_policy_lag: 32  # drop on-policy segments older than this many versions (default: 32 or 2 × env_workers, the larger; -1: no bound)
//	  learners: 2         # M data-parallel learners (default 1)
//	  sync_batch: split   # a learner's share of each minibatch: split (1/M of its rows, default) or full
//
// Each env worker steps the config's num_envs envs and pushes segments of
// num_steps × num_envs, the same shape the local loop learns from, so E env
// workers gather E times the envs; the learner learns from segments in the
// order they arrive and publishes a weights version after each. The run's
// global step counts the steps of the segments learned from; the run ends
// after `steps`. Unlike HTS, results depend on timing (which segment
// arrives first, which weights version a policy worker holds): this is
// the asynchronous, scale-out executor.
//
// What the streams drop, repeat and how stale the data is are metrics.csv
// columns after the algorithm's own (algo.DistScalars), and their final
// values are summary.json's "dist" (herd launch prints them):
//
//	dist/lag_mean, dist/lag_max  learner version − acting version, per step learned
//	dist/dropped                 segments dropped for lag > max_policy_lag
//	dist/duplicates              repeated pushes acknowledged but not queued
//	dist/discarded               samples acknowledged and never learned: taken by a policy's
//	                             drain after its learner's budget (several policies), those a
//	                             killed learner acknowledged after its last checkpoint
//	                             (transport.Stats.Lost), and, in the final row, those left in
//	                             the learner's queue at its end
//	dist/shed                    pushes refused unacknowledged at runtime.held_bytes (re-sent)
//	dist/decode_errors           samples or messages that did not decode
//	dist/stale_weights           weights versions a worker could not download in time, and
//	                             inline segments started before the learner's next version came
//	dist/abandoned               inference requests skipped: their sender had left
//	dist/infer_obs_bytes         observation bytes the env workers' inference requests carried
//	                             (NATS: bits for 0/1 values, bytes for 0…255 integers, else
//	                             float32; 0 in process, where nothing is encoded)
//	dist/batch_rows_mean         rows per policy-worker batch (all batches, all policy workers)
//	dist/batch_rows_p50, _p99    rows per batch over each policy worker's last 4096 batches (largest worker's)
//	dist/infer_latency_p50_ms, _p99_ms  a request's arrival at a policy worker to its answer
//	                             (queueing and forward pass; last 4096 requests, largest worker's)
//	dist/silent_workers          workers silent now: an env worker whose progress record has
//	                             not moved for a sixth of the stall bound (10 s) while the
//	                             learner took 4 samples per env worker from the others, a
//	                             policy worker as long and unregistered (monitor.watch)
//	dist/silences                silences begun; each is one line in the learner's output
//	                             ("env-0 silent for 10s …"), its end another ("env-0 back after …")
//	dist/resumes                 learner starts that continued the run from a checkpoint
//
// Inference: with policy_workers, each env worker asks the policy workers
// for outputs every step (four NATS message hops per round trip, about
// 143 µs of CPU over the processes on CartPole), and each step records the
// version that answered. With inline, each env worker holds a policy copy
// (worker.RunEnvInline, the off-policy env workers' inline copy), takes
// the newest version the parameter service holds before each segment and
// acts on it for the whole segment: no inference stream, no policy worker
// process (herd launch starts none), and for a small MLP on CPU about
// twice the env steps/s under herd launch (docs/BENCHMARKS.md,
// "Distributed speed"). Policy workers pay off where inference wants an
// accelerator shared by many env workers (Sample Factory's layout); SRL
// lets actors run inference locally, as inline does. With the weights of
// one version both give the same segments bit for bit.
//
// The on-policy learner keeps no sample queue (OnCapacity): a push
// returns when the learner takes the segment, and an inline env worker
// starts its next segment only on the version made from its last one
// (waiting at most 10 s, then counted in dist/stale_weights). A segment
// then waits behind the other env workers' segments only: lag ≤ env
// workers − 1 while gathering is faster than learning. PPO CartPole's
// mean lag with 2 inline env workers fell from 2.9–3.2 (a queue of one,
// acting at once) to 1.0 under herd train and 1.3–1.5 under herd launch on
// a loaded machine, where a descheduled worker adds to a few segments'
// lag (docs/BENCHMARKS.md, "Distributed runs").
//
// max_policy_lag's default, 32 versions, is about twice the largest lag
// measured with 8 env workers (herd launch, PPO CartPole, 100k steps on a
// 2-core machine under load 35: mean 7.3, max 14; with 2 env workers mean
// 1.1, max 5): it drops nothing in a healthy run and cuts off data from a
// worker that fell far behind (one stuck on old weights, or a queue drained
// after a stall). With more env workers the steady lag grows with them (E
// workers pushing in turn put a segment about E − 1 updates behind), so the
// default is 2 × env_workers when that is larger; a run that drops more
// than 5% of its segments for their lag says so once on standard error.
//
// Checkpoints (algo.Runtime.Checkpoints, `herd train --resume`, and a
// learner restarted under herd launch): a run with one learner saves its
// learner (Ape-X: with its replay, algo.OffPolicy.Checkpoint) between two
// updates with the run's dist/… counts and the sample stream's dedup
// window (checkpointer), and numbers the versions of a resumed learner
// above every version a worker may hold (transport.HeldBound). Several
// learners and several policies write none (notResumable). docs/guide/resume.md says what a
// crash loses.
//
// The learner ends the run with an error when no sample comes for 60 s
// (Options.Stall), naming the env workers alive, instead of waiting for
// ever. Workers resume their progress (transport.Progress) when restarted.
//
// Several learners (runtime.learners: M > 1; SRL's trainer workers). M
// learners (goroutines under herd train, `herd worker --role learner
// --slot i` processes under herd launch) each pull from their own sample
// queue (transport.Options.Learner), fed by env workers k mod M
// (env_workers must be a multiple of M). A shared queue group would be
// simpler, but a push retried after a lost ack could reach another
// learner, whose dedup memory has not seen its id, and be learned twice;
// a fixed queue per env worker keeps exactly-once per learner. One update
// is one segment per learner (steps / (M × num_envs × num_steps) updates,
// the learning rate annealed over them): each learner computes GAE on its
// own segment and, for every minibatch step, its gradient on its share of
// the rows; the gradients are all-gathered (transport.Collective) and every
// learner averages them in learner-id order, straight from the messages
// into its parameters' gradients with the bits of algo.AverageGrads (the
// reduction pal's sync learners use); learners on the in-process
// transport with a model of 64k values or more average in place instead,
// each summing its 1/M of the values into every learner's gradients (the
// same bits, no messages), before the grad-norm clip and the
// Adam step, so all learners take the same steps and hold the same
// parameters, bit for bit. The exchange is per minibatch step, not once
// per update, because that is synchronous data-parallel SGD: each of
// PPO's optimizer steps takes the gradient at the parameters the step
// before left, so the M shares of one minibatch must be averaged before
// the next can be computed. Exchanging once per update (each learner
// stepping on its own rows, then averaging parameters or summed steps)
// is local SGD, another algorithm with other updates. Each learner still
// clips and takes the Adam step over the whole model, as a replica. PPO's per-minibatch advantage normalisation uses
// the mean and std of all learners' rows, and target_kl their mean KL. As
// under pal (sync_batch split, the default), each learner's minibatch is
// 1/M of PPO's, so an update's minibatch has the algorithm's rows; the
// averaged gradient equals the single learner's on the union minibatch up
// to float summation order (algo/ppo TestDataParallelGradIsUnionGrad). The
// rows a minibatch takes differ from one learner shuffling the union (each
// learner shuffles its own segment, a stratified draw), so a run is not
// the single-learner run on M·num_envs envs bit for bit; on fixed data the
// learners are reproducible bit for bit (worker
// TestLearnerGroupDeterministic). Like every dist run, which segments meet
// in an update depends on timing.
//
// The off-policy learners (DQN, SAC, TD3, DDPG) are pal's sync learners
// across processes (worker.RunOffLearner with a LearnerGroup). Each keeps
// its own replay of buffer_size/M, fed by its env workers, so that
// together they hold the most recent buffer_size transitions as one
// learner's replay does. A round is one chunk per learner: the M chunks
// advance the global env-step counter by M × chunk steps, and each update
// the algorithm's schedule (algo.SplitLearner.Due) asks for over them is
// computed by every learner on its share of the minibatch (batch_size/M
// rows from its replay, its slot's stream), all-gathered with its ticket,
// averaged in learner-id order and applied once by every learner, as one
// update; SAC's, TD3's and DDPG's actor updates are one such exchange per
// phase (algo.Phaser), so the actor's gradient is taken at the critics
// the update's critic step left, as with one learner. So optimizer steps, target updates, TD3's policy delay and ε
// follow the single learner's schedule, and the counts are its counts
// (worker TestOffLearnerGroup); an update is due only when every replay
// holds its share (the smallest replay size is exchanged each round).
// Gradients of different updates (learners whose schedules diverged) end
// the run with algo.ErrGradShape instead of being averaged.
//
// The all-gather runs over NATS (one subject, herd.<run>.gather; core
// publish/subscribe, every learner receiving every message) or channels
// in-process, not over a direct TCP ring: it needs no addresses, ports or
// second TLS and credential setup, and for M = 2 a learner sends and
// receives one gradient per step either way. Each learner adds the M
// contributions itself, so no root broadcasts a result. Per PPO update
// that is update_epochs × (2 + num_minibatches) rounds (advantage
// statistics, then a gradient per minibatch step, num_minibatches being
// the learner's: M times PPO's under split) plus one for the update's
// episodes and counters, which learner 0 logs for the whole run (dist/*
// sum every learner's). Learner 0 alone publishes weights and writes the
// run. A round waits at most the sample watchdog plus 15 s (75 s by
// default), then fails naming the learners it heard nothing from; under
// herd launch learner 0 also watches the others' registrations and ends
// the run as soon as one is gone. Learners are never restarted: a new
// process could not join the rounds in progress. A contribution larger
// than the NATS connection's max payload goes out in chunks the other
// learners put back together (transport's collective).
//
// Several policies (a multiagent section: PPO, A2C and DQN in any mix).
// Every policy has streams of its own (run ID PolicyRun(run, id)), its own
// learner and its own weights versions, so a sample reaches its policy's
// learner by the stream it was pushed on, and the transport's exactly-once
// ids and lag counts hold per policy unchanged. An env worker steps one
// vector of every agent's rows (num_envs rows, num_envs / A envs), cut
// into one part per policy (env.SplitVector, lockstep; policies may have
// different action spaces, each part and each policy's pieces its own
// agents'), each part driven
// on its policy's streams, on a goroutine of its own, sampling from
// (seed + k, "env-worker", slot): an on-policy policy's part by
// worker.RunEnvVector, asking the policy workers (a policy worker serves
// every on-policy policy: one server per policy on its streams); an
// off-policy policy's by worker.RunOffEnv, as the off-policy topology's
// env worker below (an inline copy, chunks of transitions), its learner
// worker.RunOffLearner with the policy's own replay. One learner per
// policy rather than one for all: the policies share no parameters,
// optimizer state or replay, so their updates need no order between them
// and run on separate cores, and the sample wire format and dedup stay
// those of one policy. The learners move in rounds of the on-policy
// num_steps (or, every policy off-policy, one chunk of the policy with
// the fewest rows); an off-policy policy's chunk divides the round, so
// the budget (whole rounds) is whole samples of every policy and each is
// learned once. An on-policy learner learns one segment, then waits for
// the round's end; an off-policy one hands in copies of its round's
// episodes, scalars and counters and goes on, since its env workers'
// next chunks may be what the other parts, in lockstep, wait for. The
// last to complete a round logs it in policy order, each policy's
// algorithm scalars and dist/… counters as policy/<id>/… columns. A
// learner that has learned its budget takes and discards its policy's
// later samples until every learner has (drain): the env workers' shares
// of one policy's samples need not match another's, so its parts may have
// to step on, in lockstep, for another policy's last segment.
// runtime.inference inline (with an on-policy policy), env_groups,
// learners > 1 and step_time are refused. Under herd launch each worker
// process plays its role for every policy (PrepareRun, which has the
// sections of multiagent.algos).
//
// Off-policy algorithms (DQN, SAC, TD3, DDPG) run the Ape-X topology of
// worker: E env workers with inline policy copies pushing chunks of
// ChunkEnvSteps env steps of transitions (with initial priorities under
// dqn's initial_priorities: actor), no policy workers (policy_workers is
// refused), and the learner holding the replay. runtime.refresh_every and
// publish_every work as under pal. configs/dqn-cartpole-dist.yaml is the
// example.
package distexec
