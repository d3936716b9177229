//go:build !race

package learntest

// RaceEnabled reports a -race build, where sync.Pool drops items at random
// and allocation counts mean nothing.
const RaceEnabled = false
