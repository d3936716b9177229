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
// This covers on-policy algorithms (PPO, A2C: SegmentLearner). Off-policy
// learners (transitions into a prioritized buffer, Ape-X style) are not
// wired yet.
package worker
