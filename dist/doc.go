// Package dist carries herd's streams and services between goroutines,
// processes and machines: the transport layer of the distributed executor
// (SRL's design of env workers, policy workers and learners
// joined by streams and a parameter service).
//
// # Four interfaces, two carriers
//
//   - InferenceStream (request-reply): env workers send observations,
//     policy workers answer with outputs. A policy worker's Serve takes
//     every request that arrived while its previous batch ran and answers
//     them with one forward pass; several policy workers share the load
//     (NATS: the queue group "policy").
//   - SampleStream (push-pull with back-pressure): env workers push
//     finished samples (package sample's encoding), learners pull them
//     (NATS: the queue group "learners"). A push is acknowledged only once
//     it sits in a learner's bounded queue, and each pusher has one push in
//     flight, so memory is bounded by pushers + queue capacity, never by
//     how far the env workers run ahead.
//   - ParamService: versioned weights (package weights); Publish, Latest,
//     Wait for ≥ n. Versions only move forward.
//   - Membership: workers register names with keep-alives; the controller
//     lists who is alive; workers watch the controller's name and exit when
//     it is gone. It also keeps each worker's Progress (incarnation, last
//     sequence number, env steps, counters), which outlives the worker: a
//     restarted worker resumes from it, the learner adds up its counters.
//
// Each has an in-process implementation (Inproc: channels, slices and
// weight snapshots handed over by pointer, nothing encoded or copied) and a
// NATS implementation (NATS: nats.go over an embedded or external server).
// A Transport makes all four for a run ID, so a whole topology runs in one
// test on the twin, and the same test runs on an embedded NATS server
// (conformance_test.go runs every interface's suite on both).
//
// # Wire format
//
// NATS messages are protobuf (proto/herd/v1/dist.proto, package herdv1)
// with a protocol version in every message. Observations and outputs are
// packed floats; samples and weights travel as bytes in herd's own formats
// (sample.AppendEncode, weights.Version.Encode's safetensors). A message
// that does not decode, is inconsistent, or speaks another protocol version
// is counted (Stats), logged (Options.Logger) and dropped; a request gets
// an error reply so its sender does not wait for nothing. Nothing a peer
// sends can crash a worker.
//
// On NATS, weights go through JetStream's object store (bucket
// herd_<run>_params, chunked, so weights larger than a message fit), and
// every ParamService watches it (a version it cannot download within 2 s
// is counted, Stats.FetchFailed: its holder acts on older weights until
// the next one); membership uses a key-value bucket
// (herd_<run>_members) whose entries carry per-message TTLs (Nats-TTL):
// each keep-alive re-puts the key, and a key not refreshed for a TTL is
// removed by the server, which leaves a delete marker that Gone's watchers
// see. TTLs are whole seconds on NATS.
//
// Wire bytes: with SplitTransport each kind of stream has its own
// connection, so the server's per-connection counters (Server.Traffic,
// payload plus headers) are each kind's traffic; herd launch reports them
// per env step.
//
// # What a failure loses
//
//   - Inference: a request whose policy worker dies is not answered; the
//     env worker's bounded wait ends and it asks again (another policy
//     worker, or the restarted one, answers). Outputs have no side
//     effects, so asking twice is safe.
//   - Samples: a sample acknowledged by a learner that then dies before
//     pulling it is lost (at most the learner's queue capacity). A push
//     whose wait ended may or may not have been queued, so the pusher
//     retries it under the same SampleID (slot, incarnation, sequence
//     number); the learner acknowledges a repeat of an id it queued
//     without queueing it again and counts it (Stats.Duplicates). Each
//     sample is so learned at most once. Because a pusher's sequence
//     numbers reach a learner in order (one push in flight, retried until
//     acknowledged), the learner remembers only the highest number per
//     slot and incarnation, for the newest 4 incarnations of each slot:
//     memory independent of the run's length. A restarted worker gets a
//     new incarnation from Membership.Resume and continues its sequence
//     from its stored Progress, so it never repeats an id. With several
//     learners in the queue group, a retry may reach another learner
//     than the first send; exactly-once holds per learner.
//     Memory stays bounded by pushers + queue capacity: a repeat is
//     acknowledged without entering the queue.
//   - Inference: a policy worker skips (and counts, Stats.Abandoned) a
//     request whose sender has stopped waiting: the request says how long
//     its sender waits, and the policy worker compares that with how long
//     it has held the request (no clocks compared across machines).
//   - Parameters: the latest version survives in JetStream (file store)
//     across server restarts; the in-process service lives with its
//     process.
//   - Membership: a crashed worker's name disappears within one TTL of its
//     last keep-alive (keep-alives go every TTL/3).
//
// # Goroutines and errors
//
// Every call may be made from any goroutine. Contexts bound waits; they
// never end a stream (Close does). Errors wrap the sentinels below:
// ErrBadRequest (the call's own arguments; do not retry), ErrMalformed and
// ErrRejected (the peer's message or refusal; retry may help), ErrClosed.
// Each stream's own goroutines are stopped by its Close.
package dist
