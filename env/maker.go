package env

import (
	"fmt"
	"strings"
)

// Maker makes envs by id: the ids registered here and, through Remote,
// the ids of envs that live elsewhere (herd/env/remote's grpc://, grpcs://
// and shm:// ids of a herd env server). The zero Maker makes the
// registered ids only; the package's Make, MakeVector, MakeParallel and
// IsParallel are its methods. A program that opens remote ids builds a
// Maker with remote.Opener{} once (cmd/herd does) and hands it to the
// code that makes envs (algo.Header.Envs), so env itself needs no network
// code.
type Maker struct {
	// Remote opens the ids it claims (Opens); nil: none.
	Remote Opener
}

// Opener opens the envs of the ids it claims, for a Maker. Every method
// but Opens gets only ids Opens claimed.
type Opener interface {
	// Opens reports whether id is one of the Opener's.
	Opens(id string) bool
	// IsParallel reports whether id names a multi-agent env; the error
	// says why it could not tell.
	IsParallel(id string) (bool, error)
	// Make opens a single-agent env with o applied (Make's wrappers).
	Make(id string, o Options) (Env, error)
	// MakeVector opens n single-agent envs (MakeVector).
	MakeVector(id string, n int, o Options) (Vector, error)
	// MakeParallel opens a multi-agent env and returns the row options
	// its id asks for (agent_id, action_mask, state, act_as).
	MakeParallel(id string, o Options) (Parallel, FlatOptions, error)
	// MakeFlatVector opens the envs of n agent rows of a multi-agent id
	// (MakeVector).
	MakeFlatVector(id string, n int, o Options) (Vector, error)
}

func (m Maker) opens(id string) bool { return m.Remote != nil && m.Remote.Opens(id) }

// specOf is SpecOf, with a hint for an id that names a remote env (a URL)
// when m has no Opener for it.
func (m Maker) specOf(id string) (Spec, error) {
	if strings.Contains(id, "://") {
		return Spec{}, fmt.Errorf("%w %q: an env URL (grpc://, grpcs://, shm://) opens through a Maker with herd/env/remote's Opener (env.Maker{Remote: remote.Opener{}})", ErrUnknownID, id)
	}
	return SpecOf(id)
}
