package persist

import "errors"

// Sentinel errors, checked with errors.Is. Errors returned by the package
// wrap one of these with what failed and where.
var (
	// ErrEmptyKey rejects a Push, Get or Delete with an empty key.
	ErrEmptyKey = errors.New("persist: empty key")
	// ErrTooLarge rejects a value larger than Options.MaxValueBytes.
	ErrTooLarge = errors.New("persist: value too large")
	// ErrNotFound reports a key that is not in the store.
	ErrNotFound = errors.New("persist: not found")
	// ErrClosed reports a call on a closed Store.
	ErrClosed = errors.New("persist: closed")
	// ErrQueueFull reports a full task queue when Options.QueueFull is
	// QueueFullError. It is safe to retry.
	ErrQueueFull = errors.New("persist: task queue full")
	// ErrCorrupt marks every decode failure: a record, a cache file, a
	// sampler state or a snapshot manifest that does not parse or whose
	// checksum does not match.
	ErrCorrupt = errors.New("persist: corrupt data")
	// ErrNoSnapshot reports a restore from a URL that holds no complete
	// snapshot (no manifest).
	ErrNoSnapshot = errors.New("persist: no complete snapshot")
	// ErrNoSnapshotURL reports Snapshot on a store opened without one.
	ErrNoSnapshotURL = errors.New("persist: no snapshot url configured")
	// ErrUnknownSampler reports a Sample with a name no sampler declared.
	ErrUnknownSampler = errors.New("persist: unknown sampler")
	// ErrInvalidOptions wraps every problem found by Options.Validate.
	ErrInvalidOptions = errors.New("persist: invalid options")
	// ErrBackground reports that a background write failed; the store then
	// refuses new writes, because it can no longer promise what it keeps.
	ErrBackground = errors.New("persist: background write failed")
)
