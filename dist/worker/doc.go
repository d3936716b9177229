// Package worker runs an algorithm's pieces (algo.Pieces) as the three
// roles of a distributed run, joined only by package dist's streams and
// services, so the same code runs as goroutines on the in-process twin or
// as processes on machines joined by NATS:
//
//   - the env worker (RunEnv) owns a block of envs and its sampler's random
//     stream (seed, "env-worker", slot); it asks the inference stream for
//     outputs every step, samples actions itself, and pushes each finished
//     on-policy segment (T steps × its envs) to the sample stream;
//   - the policy worker (RunPolicy) serves batched inference with the
//     latest weights from the parameter service;
//   - the learner (RunLearner) publishes its initial weights, then pulls
//     segments, learns, and publishes each new version.
//
// Every wait on a peer is bounded and retried (Timeouts), so a peer that
// dies or restarts costs a bounded stall, never a hang: see package dist on
// what a failure can lose. Roles end when their context ends or their
// count is done.
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
