//go:build !race

package classic

const raceEnabled = false
