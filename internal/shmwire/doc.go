// Package shmwire is the byte layout and framing of herd's same-host
// shared-memory env transport (env ids shm://NAME/ID), shared by the client
// (package env) and herd's Go server (service/envsvc);
// python/herd_env/shm.py is the Python server's copy of the same rules.
//
// A session is one connection to the Unix-domain socket "herd-env-NAME" in
// Linux's abstract namespace. Client to server: Msg and a frame holding an
// EnvRequest (open first, then reset and state), Map then FD with the
// segment's descriptor (SCM_RIGHTS) once after open, Step once the actions
// are in the segment. Server to client: Msg and a frame holding an
// EnvResponse, Mapped once the segment is mapped, Stepped once the step's
// results are in the segment. A frame is a little-endian uint32 length and
// that many bytes of protobuf. An error that ends the session is an
// EnvResponse whose Status has no reason word.
//
// The segment (Layout) is a 64-byte header (Magic, then n, obs dim and
// action dim as little-endian uint32), then float32 actions, the
// observations, the final observations (row i meaningful when env i's
// episode ended in the step), float64 rewards, int32 lives per env
// (NoLives when the envs report none), one byte per env terminated, one
// byte per env truncated; each array starts at a multiple of 8, and the
// size is a multiple of 4096. Observations are float32, or one byte a value
// when the open answer set obs_u8 (a uint8 Box, as Gymnasium's images):
// header byte 32 (ObsSize, uint32) says which, 4 or 1. Header bytes 24 and
// 28 are the client's and the server's step counters (ReqSeq, RespSeq):
// each side may watch the other's for a few µs before it blocks on the
// socket. Byte 20
// is the client's Flags word.
//
// Wake pipes: a client that sets FlagPipes gets WantPipes instead of
// Mapped, sends FD with two descriptors (its request pipe's read end, its
// answer pipe's write end) and closes its copies of them; every byte after
// that, starting with the server's Mapped, travels on the pipes (requests
// on one, answers on the other) instead of the socket. A server that does
// not know the flag answers Mapped and the socket stays.
package shmwire
