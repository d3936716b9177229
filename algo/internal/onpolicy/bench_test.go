package onpolicy

import (
	"fmt"
	"testing"

	"herd/algo"
	"herd/internal/rng"
	"herd/nn"
	"herd/weights"
)

// BenchmarkPolicyForward measures the policy worker's pass (64-64 tanh actor
// and critic, CartPole-sized) at the batches of the local loop (4) and of a
// policy worker serving many env workers (64); no allocation.
func BenchmarkPolicyForward(b *testing.B) {
	sp := algo.Spaces{Obs: testSpaces["discrete"].Obs, Act: testSpaces["discrete"].Act}
	for _, n := range []int{4, 64} {
		b.Run(fmt.Sprintf("batch%d", n), func(b *testing.B) {
			p := newTestPolicy(b, sp, 1)
			obs := randObs(1, n, 4)
			out := make([]float32, n*p.OutDim())
			b.ReportAllocs()
			for b.Loop() {
				p.ForwardTo(out, obs, n)
			}
		})
	}
}

// BenchmarkSampler measures drawing 64 rows' actions, log-probs and values
// (Categorical and Gaussian); no allocation.
func BenchmarkSampler(b *testing.B) {
	for _, name := range []string{"discrete", "box"} {
		b.Run(name, func(b *testing.B) {
			sp := testSpaces[name]
			p := newTestPolicy(b, sp, 1)
			const n = 64
			out := p.ForwardTo(make([]float32, n*p.OutDim()), randObs(1, n, sp.Obs.Shape()[0]), n)
			s, err := NewSampler(sp, rng.New(1, "env-worker", 0))
			if err != nil {
				b.Fatal(err)
			}
			var acts algo.Acts
			b.ReportAllocs()
			for b.Loop() {
				s.SampleTo(&acts, out, n, 0)
			}
		})
	}
}

// BenchmarkWeightsHandOff measures what the local loop adds per iteration
// to hand weights from the learner to the policy: one snapshot of the
// learner's parameters (weights.New, the copy) and Policy.SetWeights (no
// copy), for the 64-64 CartPole agent (9.3k parameters).
func BenchmarkWeightsHandOff(b *testing.B) {
	sp := testSpaces["discrete"]
	opt, _ := nn.NewAdam(nn.AdamConfig{LR: 1e-3})
	l, err := NewLearner("bench", algo.Header{Seed: 1}, sp, testAgentConfig, opt, 1, 0.99, 0.95)
	if err != nil {
		b.Fatal(err)
	}
	p := newTestPolicy(b, sp, 1)
	b.ReportAllocs()
	for b.Loop() {
		if err := p.SetWeights(l.Weights()); err != nil {
			b.Fatal(err)
		}
	}
	var v *weights.Version = l.Weights()
	b.ReportMetric(float64(4*paramCount(v)), "bytes/version")
}

func paramCount(v *weights.Version) int {
	n := 0
	for i := range v.Len() {
		n += len(v.Param(i).Value)
	}
	return n
}
