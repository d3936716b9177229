// Package worker runs an algorithm's pieces (algo.Pieces) as the three
// roles of a distributed run, joined only by package transport's streams and
// services, so the same code runs as goroutines on the in-process twin or
// as processes on machines joined by NATS:
//
//   - the env worker (RunEnv) owns a block of envs and its sampler's random
//     stream (seed, "env-worker", slot); it asks the inference stream for
//     outputs every step, samples actions itself, and pushes each finished
//     on-policy segment (T steps × its envs) to the sample stream. Its
//     envs step in rollout.Segments, the one on-policy env-step loop, with
//     the inference stream as the loop's Policy;
//   - the policy worker (RunPolicy) serves batched inference with the
//     latest weights from the parameter service;
//   - or, under inline inference (RunEnvInline, runtime.inference:
//     inline), the env worker acts with a policy copy of its own instead
//     of asking: it takes the newest weights the parameter service holds
//     before each segment and acts on them for the whole segment (each
//     step records that version), and no policy worker runs. The copy is
//     the off-policy env workers' (inline.go); the actions are drawn from
//     the same stream, so with one weights version the segments are bit
//     for bit those of RunEnv (TestInlineMatchesPolicyWorker), and in
//     lockstep with the learner a run is deterministic
//     (TestInlinePPOLearnsDeterministically);
//   - the learner (RunLearner) publishes its initial weights, then pulls
//     segments, learns, and publishes each new version.
//
// Env groups (EnvConfig.Groups, runtime.env_groups G, Sample Factory's
// double buffering): the env worker splits its envs into G equal groups,
// each with its own inference request, and steps one group while the
// others' requests are in flight (rollout.NewBlockSegments with a
// pipelined Policy). With a fixed weights version the pushed
// segments are bit for bit those of G = 1 (TestEnvGroupsMatchOneGroup);
// under asynchrony the groups of one step may act on different versions
// and the step records the oldest.
//
// Every wait on a peer is bounded and retried (Timeouts), so a peer that
// dies or restarts costs a bounded stall, never a hang: see package transport on
// what a failure can lose. Roles end when their context ends or their
// count is done; the learner also when no sample came for
// LearnerConfig.Stall (its error names the workers alive).
//
// Exactly once: an env worker numbers its samples and retries a push under
// the same transport.SampleID, so a learner queues each once. A restarted worker
// continues from its transport.Progress (EnvConfig.Resume): a new incarnation
// (new ids, and its own random streams, (seed, "env-worker/<inc>", slot),
// instead of replaying the first start's), its sequence number and its
// env-step count (so DQN's ε schedule goes on where it was).
//
// Policy lag: a segment records the weights version that acted at each step
// (sample.Segment.Versions). The learner counts, per step learned, its own
// version minus that one (Counters: mean and max), and drops and counts a
// segment whose oldest step lags more than LearnerConfig.MaxLag versions
// (runtime.max_policy_lag). An inline env worker keeps its own lag low:
// it starts a segment only on the version made from its last one (see
// RunEnvInline). The off-policy learner counts lags but bounds
// none: Q-learning learns from any behaviour policy, and replay keeps old
// data by design.
//
// Metrics: EnvConfig.Metrics (EnvMetrics), PolicyConfig.Metrics
// (PolicyMetrics) and RegisterStreamStats export a worker's steps,
// episodes, weights version, inference and push latency histograms,
// retries, batch sizes and its streams' drops and duplicates to
// Prometheus (`herd worker --metrics-addr`); nil metrics cost one nil
// check per step.
//
// Ape-X exploration: with several env workers, a sampler that implements
// algo.ActorExplorer (DQN with apex_epsilon) explores at Ape-X's fixed
// per-actor ε_i = ε^(1 + 7·i/(N−1)) instead of one shared schedule.
//
// Off-policy algorithms (DQN, SAC, TD3, DDPG: TransitionLearner) run the
// Ape-X topology instead (offpolicy.go): env workers (RunOffEnv) act with
// inline policy copies refreshed from the parameter service — no policy
// workers, no inference stream: a small MLP forward is cheaper than a
// round trip, and Ape-X actors prioritize with their own copy — assemble
// n-step transitions, set their initial priorities when the pieces have a
// Prioritizer, and push them in chunks; the learner (RunOffLearner) owns
// the replay, stores what it pulls and runs Learn on the global env-step
// counter (each sample stands for a fixed number of env steps), so the
// replay ratio is the local algorithm's; back-pressure is the sample
// stream's (the learner pulls after learning). The env workers' schedule
// step (DQN's ε) is their own steps × the number of env workers.
package worker
