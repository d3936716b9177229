// Package transport carries herd's streams and services between goroutines,
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
// A fifth, CallStream, carries package flow's calls to named actors
// (request-reply on herd.<run>.actor.<name>; Inproc and NATS both make it,
// through the optional CallTransport interface): a driver numbers its
// calls to an actor 1, 2, … and makes one at a time; the actor runs each
// number once, in order, and answers a repeat of its last call from memory
// (Stats.Duplicates), so a call resent after a lost reply never runs
// twice. It remembers one call per actor: the caller has one in flight.
//
// # Wire format
//
// NATS messages are protobuf (proto/herd/v1/dist.proto, package herdv1)
// with a protocol version in every message (version 2: a version-1 peer's
// messages are refused, naming both). Outputs are packed floats;
// observations travel in the smallest encoding that holds a request's
// values exactly (package sample's rule: bits for 0/1, bytes for integers
// 0…255, else float32), so a policy worker decodes the env worker's
// float32 bits, and Stats.ObsBytes counts them; samples and weights travel
// as bytes in herd's own formats
// (sample.AppendEncode, weights.Version.Encode's safetensors). A message
// that does not decode, is inconsistent, or speaks another protocol version
// is counted (Stats), logged (Options.Logger) and dropped; a request gets
// an error reply so its sender does not wait for nothing. Nothing a peer
// sends can crash a worker.
//
// On NATS, each weights version is pushed on herd.<run>.params (version in
// the Herd-Weights-Version header) and put in JetStream's object store
// (bucket herd_<run>_params, chunked, so weights larger than a message
// fit; larger ones are not pushed), which trails the pushes by at most 8
// versions and holds the newest 50 ms after the last. Every ParamService
// takes the pushes and watches the store, fetching from it only a version
// whose push has not come within 100 ms (late joiners, lost pushes); a
// version it cannot download within 2 s is counted, Stats.FetchFailed: its
// holder acts on older weights until the next one. Membership uses a
// key-value bucket (herd_<run>_members) whose entries carry per-message TTLs (Nats-TTL):
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
//     memory independent of the run's length. That memory of the ids
//     pulled is saved with a learner's checkpoint and restored into the
//     learner that resumes from it (DedupWindow): retries of ids it holds
//     are duplicates, and the numbers a pusher skipped past it (acknowledged
//     after the checkpoint by the learner that died) are counted as
//     Stats.Lost. A restarted worker gets a
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
//
// # Design notes
//
// Transport layer (`transport`). Four interfaces, each with an in-process twin (`transport.Inproc`:
// channels, slices and weight snapshots handed over by pointer) and a NATS implementation
// (`transport.NATS`, nats.go v1.55.0; `transport.StartServer` embeds nats-server v2.15.2 on loopback):
//
//	| interface | NATS carrier | back-pressure / failure |
//	|---|---|---|
//	| `InferenceStream` (`Infer` / `Serve(handler)`) | request-reply on `herd.<run>.infer`, queue group `policy` | a policy worker batches what arrived while its last batch ran; an unanswered request times out and is retried (outputs have no side effects) |
//	| `SampleStream` (`Push` / `Pull`) | request-reply on `herd.<run>.samples`, queue group `learners` | acked once queued in a learner's bounded queue; one push in flight per pusher, so memory ≤ pushers + capacity; no learner yet → the pusher waits |
//	| `ParamService` (`Publish` / `Latest` / `Wait(≥ n)`) | push on `herd.<run>.params`, then JetStream object store `herd_<run>_params`, one object per version (newest two kept), every instance watches | versions only move forward; weights survive a server restart (file store) |
//	| `Membership` (`Register` / `Members` / `Gone`) | JetStream KV `herd_<run>_members`, per-message TTL (`Nats-TTL`) re-put every TTL/3; delete markers on expiry | a crashed worker's name goes within one TTL of its last keep-alive |
//
// Wire messages are protobuf (`proto/herd/v1/dist.proto`, package `herdv1`, generated by
// `proto/gen.sh` with the pinned protoc-gen-go) with a protocol version in each; a malformed or
// wrong-version message is counted (`Stats`), logged and dropped, and a request gets an error reply.
// One conformance suite per interface runs on both implementations (`transport/conformance_test.go`);
// NATS-only tests cover malformed input on every subject and a server restart.
//
// Roles (`worker`). `RunEnv` (envs + sampler with the slot's own stream; one inference
// request per step for all its envs; pushes `num_steps × num_envs` segments), `RunPolicy`
// (`Serve` with the newest weights from the parameter service), `RunLearner` (publishes version 0,
// then learn + publish per pulled segment). Every wait on a peer is bounded and retried.
//
// Executor and CLI. `runtime.executor: dist` (`run/distexec`) runs the roles as goroutines over
// either carrier through `algo.TrainRun`, so the run directory is the usual one. `herd launch`
// stores the resolved config in the run's KV bucket, registers as `controller`, and starts `herd
// worker` processes (`--role env|policy|learner`); the learner process runs `distexec` in
// learner-only mode and writes the run directory. Children get `Pdeathsig` (Linux), the launcher's
// lease is closed at the end (workers elsewhere exit on `Gone`), the workers it started also get
// SIGTERM at once (a worker whose KV watch lived on a NATS node that died would see `Gone` only
// late), and stragglers are killed after 2 × TTL + 2 s.
// Unlike HTS, a distributed run is asynchronous: which segment arrives first and which weights a
// policy worker holds depend on timing, so results vary run to run for one seed.
//
// Off-policy topology (Ape-X). For DQN/SAC/TD3/DDPG `distexec` builds `worker.RunOffEnv` env
// workers with *inline* policy copies (refreshed from the parameter service every `refresh_every`
// env steps; no policy workers, no inference stream — chosen because a small MLP forward is cheaper
// than a round trip and Ape-X actors prioritize with their own copy) that push chunks of ~50 env
// steps of n-step transitions with initial priorities, and `worker.RunOffLearner`, which owns the
// (prioritized) replay, adds each pulled chunk and runs `Learn` on the global env-step counter (a
// chunk stands for a fixed number of env steps), so the replay ratio is the local algorithm's;
// back-pressure is the sample stream's. `herd launch` starts no policy workers for it.
//
// `herd launch --force/--resume` mean what they mean for `herd train`: the launcher checks the
// run directory before starting any process and hands the mode to the learner. Faults: an env
// worker's inference call times out after 1 s (`worker.Timeouts.Infer`) and is re-sent, so a
// killed policy worker stalls env steps ≤ ~1 s while the queue group routes to the live one;
// `--nats-replicas N` puts the run's JetStream buckets on N cluster nodes.
//
// External NATS cluster with replicas. `herd launch --nats URL,URL,URL --nats-replicas 3`
// first waits (`transport.NATS.Ready`, ≤ 30 s with back-off, then a clear error) until the cluster's
// JetStream answers, i.e. its meta leader is elected, and creates the run's three buckets (config,
// members, params) itself, one after the other (`CreateBuckets`); every other process only binds to
// them (creating one only if it is missing), because all roles creating or updating the same R3
// streams at once can stall the cluster's JetStream API past its 5 s timeout. Every JetStream call
// on that path, the params publish and a registration's first put retry transient errors (no
// responders, timeouts, 503 "temporarily unavailable", name in use) with back-off for ≤ 30 s
// (`transport.failover`; one API attempt ≤ 10 s, one publish ≤ 4 s). Losing one of 3 nodes costs: its
// clients reconnect to the others; a request in flight on it is lost, so a sample push is re-sent
// after 5 s without an ack (with the batch's stable `Herd-Sample-Id`; the learner acks a repeat
// instead of queueing it twice); each stream it led has
// no leader until the survivors elect one (nats-server waits 4–9 s), so the learner's publish,
// and with it training, stalls ~5–10 s. Keep the registration TTL above that election time (the
// test uses `--ttl 15s`): keep-alives fail while the members bucket has no leader, and a
// registration that expires meanwhile (the controller's above all) ends the workers. An existing bucket keeps its
// config (a later run with another `--nats-replicas` must use another `--run`). A new run (no
// `--resume`) of a run ID whose run is over starts afresh: once no member is registered, launch
// deletes the earlier run's end mark and workers' progress (`ResetRun`) and purges its params
// store (`ClearWeights`), whose versions the new run's readers would otherwise start on.
// `TestLaunchNATSClusterNodeKilled` starts 3 nats-server processes, runs with R3 and kills -9 the
// node with herd clients that leads the most of the run's streams.
//
// Deployment (`deploy/`): the same processes as `herd launch`, placed by an orchestrator. The
// controller is `herd launch --nats URLS --no-workers`: it stores the config, registers as
// `controller`, polls membership once a second until `learner-0` has registered and then waits for
// its `Gone`, then reads the learner's exit status from the run's end mark (`EndRun`,
// `RunEnded`), so a controller Job ends with the run's status and workers (Indexed Jobs or compose
// services) exit when its registration is gone (`Gone` watches the key and also looks it up once
// per TTL, so a worker cut off by a partition when the controller left still sees it gone). NATS
// runs as a 3-node JetStream cluster (StatefulSet with routes over the headless Service, or
// `deploy/compose/compose.yaml`); workers list all three URLs. `cmd/herd/deploy_test.go` decodes
// the manifests strictly with `k8s.io/api` types and parses each herd command with herd's own flags.
package transport
