// Package stattest holds the statistical checks shared by the replay
// tests: Pearson's chi-square goodness-of-fit test of observed draw counts
// against expected probabilities.
package stattest

import (
	"math"

	"gonum.org/v1/gonum/stat/distuv"
)

// ChiSquare returns Pearson's statistic Σ (O_i − E_i)² / E_i for counts
// observed against probs (E_i = n·probs[i], n = Σ counts) and its p-value
// under the χ² distribution with (number of cells with E_i > 0) − 1 degrees
// of freedom. Cells with probability 0 must have count 0; otherwise the
// p-value is 0.
func ChiSquare(counts []int, probs []float64) (stat, pValue float64) {
	n := 0
	for _, c := range counts {
		n += c
	}
	cells := 0
	for i, p := range probs {
		if p <= 0 {
			if counts[i] != 0 {
				return math.Inf(1), 0
			}
			continue
		}
		cells++
		e := float64(n) * p
		d := float64(counts[i]) - e
		stat += d * d / e
	}
	if cells < 2 {
		return stat, 1
	}
	return stat, 1 - distuv.ChiSquared{K: float64(cells - 1)}.CDF(stat)
}
