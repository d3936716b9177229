package hts

import (
	"math/rand/v2"
	"time"

	"herd/env"
)

// Prediction is HTS-RL's Claim 1 evaluated for one setup: the expected
// wall time per env step of synchronous and of HTS collection.
type Prediction struct {
	// Sync is α·E[max_i X_i] / α = E[max_i X_i]: every step waits for the
	// slowest of the N envs.
	Sync time.Duration
	// HTS is E[max_i Σ_{t<α} X_{i,t}] / α: each env runs its α steps on
	// its own and only the segment waits for the slowest env.
	HTS time.Duration
}

// Predict evaluates Claim 1 (HTS-RL, §4: the expected time of synchronous
// collection is α·E[max over envs of one step], that of HTS collection
// E[max over envs of the sum of α steps]) for n envs whose step times are
// st's distribution plus a fixed per-step overhead (the inference round
// trip and the sleep's overshoot, measured by the caller). The expectations
// are integrated by Monte Carlo over `trials` segments drawn from r.
func Predict(st env.StepTime, n, alpha int, overhead time.Duration, trials int, r *rand.Rand) Prediction {
	var syncSum, htsSum float64
	sums := make([]float64, n)
	for range trials {
		clear(sums)
		for range alpha {
			var mx float64
			for i := range sums {
				x := float64(st.Draw(r) + overhead)
				sums[i] += x
				mx = max(mx, x)
			}
			syncSum += mx
		}
		var mx float64
		for _, s := range sums {
			mx = max(mx, s)
		}
		htsSum += mx
	}
	steps := float64(trials * alpha)
	return Prediction{Sync: time.Duration(syncSum / steps), HTS: time.Duration(htsSum / steps)}
}
