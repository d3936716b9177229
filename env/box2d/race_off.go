//go:build !race

package box2d

// Normal builds step worlds in parallel; see sync.go.
func box2dLock()   {}
func box2dUnlock() {}

const raceEnabled = false
