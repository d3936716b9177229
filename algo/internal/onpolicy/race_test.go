//go:build race

package onpolicy

const raceEnabled = true
