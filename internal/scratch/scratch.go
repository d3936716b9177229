// Package scratch holds the resize of the buffers hot loops keep from
// call to call instead of allocating each time.
package scratch

// Resize returns s[:n], its contents kept, when s has the capacity, else
// a new zeroed slice of n.
func Resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}
