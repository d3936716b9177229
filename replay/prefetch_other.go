//go:build !amd64 || purego

package replay

import "unsafe"

// prefetch does nothing where no prefetch instruction is wired in.
func prefetch(unsafe.Pointer) {}
