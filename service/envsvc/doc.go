// Package envsvc serves herd's own environments (env.Make ids) over gRPC with
// the herd.v1 EnvService protocol (proto/herd/v1/env.proto), so that a
// trainer on another process or machine can step them: `herd serve env`
// runs it (Run), and env.Make("grpc://HOST:PORT/CartPole-v1") is its client.
//
// # Sessions
//
// Each Session stream owns num_envs envs built with env.Make for its whole
// life and steps them in the stream's goroutine; sessions share nothing, so
// a client that misbehaves (a malformed message, a wrong protocol version,
// too many envs) has its own stream ended with INVALID_ARGUMENT or
// FAILED_PRECONDITION (a message over the size limit: RESOURCE_EXHAUSTED,
// from gRPC itself) while every other session goes on. Errors an env
// returns (an invalid action, a step that needs a reset) are answered
// in-band as a Status and the session continues, as a local env would.
//
// A session opened with parallel = true holds multi-agent envs
// (env.MakeParallel ids: the MPE envs; and Config.ParallelEnvs, Go envs of
// one's own) and steps them with per-agent maps (parallel.go); Describe
// lists those ids as parallel_env_ids, which is how a client knows that
// grpc://HOST:PORT/ID is multi-agent. Each answer carries the agents'
// action masks (env.Info.ActionMask) and, when the open asks for it
// (global_state), the env's env.GlobalState.
//
// The Python server (python/herd_env) speaks the same protocol for
// Gymnasium envs and PettingZoo Parallel envs. Both also serve the
// same-host shared-memory transport (env ids shm://NAME/ID; ListenShm and
// ServeShm here, `herd serve env --shm NAME`): the same single-agent
// sessions, with each batch's arrays in a segment both processes map
// (internal/shmwire).
package envsvc
