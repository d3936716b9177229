// Package service holds what herd's gRPC services share: transport security
// (TLS, optionally mutual), message size limits, listen-address defaults,
// the protocol version, and Run, the serve loop of every `herd serve`
// command. The services themselves live in service/envsvc
// (remote environments) and service/replaysvc (the persistent replay store);
// their wire protocol is proto/herd/v1 (package herdv1), and the Go client
// for remote envs is package env itself (env.Make("grpc://host:port/ID")).
//
// # Security defaults
//
// Servers listen on 127.0.0.1 unless an address names another host
// (Listen). TLS is on when a certificate is given; with a client CA every
// client must present a certificate that CA signed (mTLS). Every message
// is bounded by MaxMessageBytes unless the caller chooses another limit.
// Clients put a deadline on every call (a stream's calls included) and
// send keepalive pings, so a dead or hung server is an error within the
// deadline, never a hang.
//
// # Design notes
//
// Protocol. `proto/herd/v1` (package `herd.v1`, so a v2 can live beside it). Within v1 fields
// are only added; every session/request carries `protocol_version` and a server that does not speak
// it answers FAILED_PRECONDITION. Spaces are described in full (Discrete n/start, Box low/high/shape,
// MultiDiscrete nvec). Stepping is one bidirectional `Session` stream per client: `Open` (env id,
// num_envs, time limit, autoreset) then one `Reset`/`Step`/`State` request at a time, each answered
// by exactly one response; one `StepRequest` carries the actions of all N envs and one `Batch` the
// N results, with the final observations of ended episodes packed in env order. Generated code is
// committed: Go by protoc-gen-go v1.36.12 and protoc-gen-go-grpc v1.6.2 (installed by
// `proto/gen.sh` with `go install`), Python messages by Debian's protoc 3.21, the version of Debian's
// python3-protobuf 4.21 runtime (grpc_tools 1.14 bundles protoc 3.5, whose older descriptor-building
// style protobuf 4.x only tolerates) and Python services by Debian's `python3 -m grpc_tools.protoc`. `.ci/run` installs those
// packages, regenerates and fails on `git diff`.
//
// Errors: two kinds. A request that the env refuses but the session survives (an action outside
// the space, a step that needs a reset, a bad state) is answered in-band with a `Status` (gRPC code +
// stable reason word), because ending the stream would destroy the other N−1 envs' episodes;
// herd's client maps the reasons to `env.ErrInvalidAction`, `ErrNeedsReset`, `ErrInvalidState`,
// wrapping a gRPC status error too. A malformed session (no open first, open twice, wrong version,
// too many envs, wrong seed count) ends that stream with INVALID_ARGUMENT / FAILED_PRECONDITION /
// NOT_FOUND; sessions share nothing, so others go on. Two wire-level faults are answered by gRPC
// itself, before any handler sees the message: a message over the size limit gets RESOURCE_EXHAUSTED
// and bytes that do not parse get INTERNAL (TestBadInput, TestGarbageBytes). herd's protocol would rather say
// INVALID_ARGUMENT; grpc-go writes these statuses from inside RecvMsg (and wraps every codec error
// as INTERNAL), so a handler cannot change them short of taking raw bytes and parsing them itself,
// which we judged not worth it. The server keeps serving other sessions in both cases.
//
// Client (package env/remote). An `env.Maker` whose Remote is `remote.Opener{}` hands the
// `grpc://`/`grpcs://`/`shm://` ids to package `env/remote`, which imports env, the generated
// package and `service`; env imports none of them. `remote.Env` (Env + Stater) and `remote.Vector`
// (Vector) keep the local semantics: actions are checked on the client first (an invalid batch leaves
// every env untouched), episode statistics are computed on the client, the time limit is sent to the
// server. Every call has a deadline without a goroutine per call: one reusable timer cancels the
// stream's context when the answer is late; a call that times out or whose connection dies breaks
// the session (every later call returns that error), never hangs. TLS options travel in the id's
// query string, so `herd train --env` needs no new flags and algorithms need no changes.
//
// Determinism and float64. The Go server builds each env with `env.Make`, and the client derives
// per-env seeds with `env.VectorSeed`, so a remote vector from seed s steps bit-identically to a
// local SyncVector (TestVectorMatchesLocal). Observations travel as float32 (herd's encoding);
// rewards as double. For the Python comparison the protocol's `State` request reads and writes the
// env's float64 state (`env.unwrapped.state`), so TestPythonCartPoleMatchesGo compares what both
// sides keep in float64 (to 1e-12; measured max 4e-15) rather than float32 observations.
//
// Servers. `service.Listen` binds 127.0.0.1 when the address names no host. Both env
// servers bound live sessions (`--max-sessions`, Go 256 / Python 64) and refuse one more at once
// with RESOURCE_EXHAUSTED: Python's thread pool would otherwise queue it silently until the
// client's deadline. The Go env server
// steps a session's envs in that stream's goroutine; the Python one in gRPC's thread pool, one
// thread per live session. The replay server is stateless over `persist.Store` (safe for concurrent
// use), validates a whole Push batch (keys, value size, every sampler's `Check`) before writing any
// of it, and implements UpdatePriorities as GetRecord + Push under a mutex (persist has no
// field-only update; a concurrent Push of the same key may win — documented in replaysvc).
//
// Not done / weak. No kwargs for remote envs; Python Box/MultiDiscrete actions become NumPy
// arrays only when NumPy is present (lists otherwise); the Python server handles one env id per
// process; the replay service has no streaming Push (one unary call per batch).
package service
