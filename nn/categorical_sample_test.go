package nn

import (
	"math"
	"testing"

	"herd/internal/rng"
)

// TestSampleLogProbTo: the same actions as SampleTo from the same stream,
// and the log-probabilities LogProbTo gives them, bit for bit.
func TestSampleLogProbTo(t *testing.T) {
	const rows = 500
	for _, n := range []int{1, 2, 5} {
		c := Categorical{N: n}
		r := rng.New(1, "nn/sample", n)
		logits := make([]float32, rows*n)
		for i := range logits {
			logits[i] = float32(r.NormFloat64() * 3)
		}
		want := c.SampleTo(make([]int, rows), logits, rng.New(2, "nn/sample", n))
		wantLP := c.LogProbTo(make([]float32, rows), logits, want)
		got, gotLP := make([]int, rows), make([]float32, rows)
		c.SampleLogProbTo(got, gotLP, logits, rng.New(2, "nn/sample", n))
		for i := range want {
			if got[i] != want[i] || math.Float32bits(gotLP[i]) != math.Float32bits(wantLP[i]) {
				t.Fatalf("N=%d row %d: action %d, log π %v; want %d, %v", n, i, got[i], gotLP[i], want[i], wantLP[i])
			}
		}
	}
}
