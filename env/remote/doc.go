// Package remote opens envs that live on a herd env server (herd serve
// env, or Python's herd_env.serve, which serves Gymnasium and PettingZoo
// envs), for env.Maker: with env.Maker{Remote: remote.Opener{}}, an id of
// the form
//
//	grpc://HOST:PORT/ENV_ID[?timeout=30s&inflight=K]
//	grpcs://HOST:PORT/ENV_ID[?ca=FILE&cert=FILE&key=FILE&server_name=NAME&timeout=30s&inflight=K]
//	shm://NAME/ENV_ID[?timeout=30s&inflight=K&spin=5us]
//
// makes the Maker's Make and MakeVector open a session on the server
// instead of building the env here. grpcs
// uses TLS: ca verifies the server (default: the system roots), cert and key
// are the client certificate for servers that require one (mTLS). timeout
// bounds every call, Reset and Step included; a call that runs past it, or
// whose server died, fails with a gRPC status error and the session is then
// unusable (Close it and make a new one).
//
// shm:// reaches a server on the same host (Linux) through the Unix-domain
// socket NAME in the abstract namespace (python3 -m herd_env.serve --shm
// NAME, or herd serve env --shm NAME; internal/shmwire has the protocol):
// actions, observations (one byte a value for a uint8 Box, as over gRPC),
// rewards, lives and done flags travel in a shared memory segment and one byte each way wakes the other side; the other
// requests (open, reset, state, errors) travel as the protocol's messages.
// The bytes and messages go over two pipes the client hands over the socket
// after the segment (a pipe byte wakes the other side for less than a
// socket byte; a server that does not take them keeps the socket). The
// segment is an anonymous memory file (memfd) handed over the socket, so it
// has no name in /dev/shm and disappears with the last process that maps
// it, whichever side dies; each side holds the only write end of the pipe
// the other reads, so a dead peer ends a read at once. spin (default 0, at
// most 50us, 0 never) is how long the client watches the segment for a
// step's answer before it blocks: a fast env's answer then arrives without
// a sleep and a wake-up (internal/shmwire.SpinFor).
//
// MakeVector puts all n envs in ONE session, so one message carries the n
// actions and one message the n results. With inflight=K (1 ≤ K ≤ n) it
// opens K sessions of about n/K consecutive envs each and sends the K
// sub-batches before reading any answer, so the server steps one while the
// next travels. The results are the same bits for every K: each env keeps
// its own seed and random stream whichever session holds it. Make, one
// env, is one session whatever K says (a run's id serves its vectors and
// the single envs made from it alike). The server
// resets ended episodes in the same step (the Vector convention).
// WithEpisodeStatistics and WithStrictActions are applied on this side;
// WithMaxEpisodeSteps and WithoutTimeLimit are sent to the server;
// WithKwargs is not supported.
//
// It is a package of its own so that env, and everything that makes envs
// from ids, compiles without gRPC and protobuf: only the program that
// builds the Maker (cmd/herd) imports it.
//
// Errors the session survives come back in the answer as a status and are
// mapped to env's sentinels: an action outside the space wraps
// ErrInvalidAction (and the gRPC status, InvalidArgument), a step that needs
// a reset ErrNeedsReset, a bad state ErrInvalidState.
package remote
