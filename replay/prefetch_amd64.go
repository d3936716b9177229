//go:build amd64 && !purego

package replay

import "unsafe"

// prefetch asks the CPU to bring the cache line holding *p closer
// (PREFETCHT0). It reads nothing a Go program can observe: a hint, not a
// load, so it needs no lock.
//
//go:noescape
func prefetch(p unsafe.Pointer)
