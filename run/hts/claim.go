package hts

import (
	"math"
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

// eulerGamma is the Euler–Mascheroni constant γ, the mean of the standard
// Gumbel distribution.
const eulerGamma = 0.5772156649015329

// ClosedForm evaluates Claim 1 in closed form, HTS-RL's Eq. 7 route: the
// step time is taken as Gamma-distributed with the mean and variance of st
// (tail included; shape k = 1/CV², scale θ = mean·CV²), so that the sum of
// an env's α steps is Gamma(α·k, θ), and the expected maximum over the n
// envs is the Gamma extreme-value (Gumbel) approximation
//
//	E[max of n] ≈ b_n + γ·a_n,  F(b_n) = 1 − 1/n,  a_n = 1/(n·f(b_n)),
//
// with F and f the Gamma CDF and density and γ Euler's constant. Per step:
// Sync = E[max of n Gamma(k, θ)] + overhead, HTS = E[max of n
// Gamma(α·k, θ)]/α + overhead. herd evaluates b_n and a_n exactly (the
// Gamma quantile) rather than by their asymptotic expansion in ln n,
// which breaks down when the shape α·k is large next to ln n, as it is for
// a segment. With n = 1 or CV = 0 the maximum is the mean.
func ClosedForm(st env.StepTime, n, alpha int, overhead time.Duration) Prediction {
	m := float64(st.Mean)
	cv := st.CV
	ex2 := m * m * (1 + cv*cv) // E[X²] of the body
	if st.TailProb > 0 {
		p, f := st.TailProb, st.TailFactor
		m *= 1 + p*(f-1)
		ex2 *= 1 - p + p*f*f
	}
	varX := ex2 - m*m
	if n <= 1 || !(varX > 1e-12*m*m) {
		d := time.Duration(m) + overhead
		return Prediction{Sync: d, HTS: d}
	}
	k, theta := m*m/varX, varX/m
	a := float64(max(alpha, 1))
	return Prediction{
		Sync: time.Duration(gammaMaxMean(k, theta, n)) + overhead,
		HTS:  time.Duration(gammaMaxMean(a*k, theta, n)/a) + overhead,
	}
}

// gammaMaxMean is the Gumbel approximation of the expected maximum of n
// independent Gamma(k, θ) variables.
func gammaMaxMean(k, theta float64, n int) float64 {
	b := gammaQuantile(k, 1-1/float64(n))
	lg, _ := math.Lgamma(k)
	density := math.Exp((k-1)*math.Log(b) - b - lg) // f(b) for θ = 1
	return theta * (b + eulerGamma/(float64(n)*density))
}

// gammaQuantile returns x with P(k, x) = q for the regularized lower
// incomplete gamma function P (Gamma(k, 1)'s CDF), by bisection.
func gammaQuantile(k, q float64) float64 {
	lo, hi := 0.0, k+1
	for gammaP(k, hi) < q {
		lo, hi = hi, 2*hi
	}
	for range 200 {
		mid := (lo + hi) / 2
		if gammaP(k, mid) < q {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2
}

// gammaP is the regularized lower incomplete gamma function P(k, x): its
// power series below x = k + 1, else 1 minus the continued fraction of
// Q(k, x) (modified Lentz).
func gammaP(k, x float64) float64 {
	if x <= 0 {
		return 0
	}
	lg, _ := math.Lgamma(k)
	front := math.Exp(k*math.Log(x) - x - lg)
	if x < k+1 {
		term := 1 / k
		sum := term
		for i := 1; i < 10000; i++ {
			term *= x / (k + float64(i))
			sum += term
			if term < sum*1e-16 {
				break
			}
		}
		return front * sum
	}
	const tiny = 1e-300
	b := x + 1 - k
	c, d := 1/tiny, 1/b
	h := d
	for i := 1; i < 10000; i++ {
		an := -float64(i) * (float64(i) - k)
		b += 2
		d = an*d + b
		if math.Abs(d) < tiny {
			d = tiny
		}
		c = b + an/c
		if math.Abs(c) < tiny {
			c = tiny
		}
		d = 1 / d
		del := d * c
		h *= del
		if math.Abs(del-1) < 1e-16 {
			break
		}
	}
	return 1 - front*h
}
