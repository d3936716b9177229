// Package trainstate is the on-disk container of a resumable run's full
// training state: a versioned header naming the algorithm, the
// env, the hash of the herd config and the env step it was taken at, then
// named opaque sections (weights, optimizer moments, random streams' states,
// env states, replay contents, counters), then a SHA-256 of all the bytes
// before it.
//
// Dir keeps the last K checkpoints of a run directory, each written to a
// staging name, fsynced and renamed into place (internal/atomicfile), and
// loads the newest one that decodes, naming each newer one it had to skip
// (truncated, corrupt, another format version) so that the caller can say so.
//
// The package knows nothing of algorithms: what goes in a section and how
// it is restored belongs to the code that owns that state.
package trainstate
