package remote

import "herd/env"

// Opener opens remote ids for an env.Maker: env.Maker{Remote:
// remote.Opener{}} makes the registered ids and the remote ones alike.
type Opener struct{}

var _ env.Opener = Opener{}

// Opens reports whether id is a remote id (IsID).
func (Opener) Opens(id string) bool { return IsID(id) }

// IsParallel asks id's server whether it serves the env as a multi-agent
// env.
func (Opener) IsParallel(id string) (bool, error) { return isParallel(id) }

// Make opens one env in a session of its own (Env).
func (Opener) Make(id string, o env.Options) (env.Env, error) { return makeRemote(id, o) }

// MakeVector opens n envs in one session, or in inflight sessions (Vector).
func (Opener) MakeVector(id string, n int, o env.Options) (env.Vector, error) {
	v, err := makeVector(id, n, o)
	if err != nil {
		return nil, err // not a nil *Vector in the interface
	}
	return v, nil
}

// MakeParallel opens one multi-agent env (Parallel).
func (Opener) MakeParallel(id string, o env.Options) (env.Parallel, env.FlatOptions, error) {
	return makeRemoteParallel(id, o)
}

// MakeFlatVector opens the envs of n agent rows in one session.
func (Opener) MakeFlatVector(id string, n int, o env.Options) (env.Vector, error) {
	return makeRemoteFlatVector(id, n, o)
}
