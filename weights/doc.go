// Package weights holds versioned, immutable snapshots of a model's
// parameters: what a learner hands out and what policy workers act with.
//
// # Versions
//
// A Version is a number that only grows plus a deep copy of the parameters
// taken when it was made. Nothing writes a Version after New returns, so any
// number of goroutines read one without locks while the learner goes on
// updating its own live parameters.
//
// # The in-process parameter service
//
// Store publishes versions behind an atomic pointer: Latest never blocks and
// never sees a torn version (it sees the old one or the new one), Publish
// refuses a number that does not grow, and Wait parks (no polling) until a
// version at or past a number appears. Executors that run in one process
// (local, HTS, PAL) share a Store; the distributed executor's parameter
// service carries Encode's bytes between processes.
//
// # Bytes
//
// Encode writes a version as safetensors (the same layout as a checkpoint,
// PyTorch names and layout) with the version number in the metadata, so the
// bytes are a loadable checkpoint too. Decode needs the parameter list of a
// model built from the run config (names, shapes, layouts): a policy is
// rebuilt from the bytes plus the config, never from bytes alone, which keeps
// a corrupt or hostile message from choosing what gets allocated.
package weights
