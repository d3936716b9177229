package nn

import "math/rand/v2"

// SampleLogProbTo is SampleTo and then LogProbTo of the drawn actions,
// with one log-sum-exp per row instead of two: the same draws from r and
// the same bits. logProbs has one entry per row.
func (c Categorical) SampleLogProbTo(dst []int, logProbs, logits []float32, r *rand.Rand) {
	b := c.rows("SampleLogProbTo", logits)
	if len(dst) != b || len(logProbs) != b {
		shapePanic("Categorical.SampleLogProbTo: len(dst)=%d, len(logProbs)=%d, want %d rows", len(dst), len(logProbs), b)
	}
	for row := range b {
		dst[row], logProbs[row] = sampleRow(logits[row*c.N:(row+1)*c.N], r)
	}
}
