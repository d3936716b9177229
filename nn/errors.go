package nn

import "errors"

// Sentinel errors. Every error returned by this package wraps one of them, so
// callers can test the class with errors.Is.
var (
	// ErrConfig marks an invalid network, head or optimizer configuration.
	ErrConfig = errors.New("nn: invalid config")
	// ErrShape marks mismatched sizes: parameter lists that do not line up,
	// buffers of the wrong length. Hot-path math (Forward, Backward, heads,
	// losses) treats a wrong length as a programming error and panics with an
	// error wrapping ErrShape, as gonum and the slices package do.
	ErrShape = errors.New("nn: shape mismatch")
	// ErrCorrupt marks a checkpoint that cannot be decoded: truncated file,
	// bad header, offsets out of range, unsupported dtype.
	ErrCorrupt = errors.New("nn: corrupt checkpoint")
	// ErrMissing marks a checkpoint that lacks a tensor the caller asked for.
	ErrMissing = errors.New("nn: tensor missing from checkpoint")
	// ErrUnavailable marks a GEMM backend that is not compiled in or not
	// supported by this CPU.
	ErrUnavailable = errors.New("nn: backend unavailable")
)
