//go:build race

package classic

// raceEnabled shrinks the slowest reference checks under -race, which adds
// nothing to single-goroutine arithmetic.
const raceEnabled = true
