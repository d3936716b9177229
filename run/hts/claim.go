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

// gammaFit returns the Gamma distribution with st's mean and variance
// (tail included): shape k = mean²/var, scale θ = var/mean. ok is false
// when the step time has no variance (every step takes the mean).
func gammaFit(st env.StepTime) (mean, k, theta float64, ok bool) {
	m := float64(st.Mean)
	cv := st.CV
	ex2 := m * m * (1 + cv*cv) // E[X²] of the body
	if st.TailProb > 0 {
		p, f := st.TailProb, st.TailFactor
		m *= 1 + p*(f-1)
		ex2 *= 1 - p + p*f*f
	}
	varX := ex2 - m*m
	if !(varX > 1e-12*m*m) {
		return m, 0, 0, false
	}
	return m, m * m / varX, varX / m, true
}

// Eq7 evaluates Claim 1 with HTS-RL's Eq. 7: an env's step times are
// Gamma(k, θ) (exponential when k = 1, the paper's case), so the sum of its
// α steps is Gamma(α·k, θ), and the expected maximum over n envs is the
// Gumbel extreme-value limit of that sum,
//
//	E[max of n Gamma(s, θ)] ≈ θ·(ln n + (s − 1)·ln ln n − ln Γ(s) + γ),
//
// per step Sync = that with s = k, HTS = that with s = α·k, divided by α,
// each plus overhead. k and θ match st's mean and variance. The limit is
// exact as n → ∞ for a fixed shape s; for the shapes of a segment (s = α·k
// in the hundreds) and a handful of envs it is far off, and where it falls
// below the mean — impossible for a maximum — that side's OK is false
// (GammaExact holds there). With n = 1 or CV = 0 the maximum is the mean.
func Eq7(st env.StepTime, n, alpha int, overhead time.Duration) Eq7Prediction {
	m, k, theta, varies := gammaFit(st)
	if n <= 1 || !varies {
		d := time.Duration(m) + overhead
		return Eq7Prediction{Prediction{Sync: d, HTS: d}, true, true}
	}
	a := float64(max(alpha, 1))
	ln := math.Log(float64(n))
	limit := func(s float64) float64 {
		lg, _ := math.Lgamma(s)
		return theta * (ln + (s-1)*math.Log(ln) - lg + eulerGamma)
	}
	sync, hts := limit(k), limit(a*k)/a
	return Eq7Prediction{
		Prediction: Prediction{Sync: time.Duration(sync) + overhead, HTS: time.Duration(hts) + overhead},
		SyncOK:     sync >= m,
		HTSOK:      hts >= m,
	}
}

// Eq7Prediction is Eq. 7's prediction with, per side, whether the limit
// is in its range.
type Eq7Prediction struct {
	Prediction
	SyncOK, HTSOK bool
}

// GammaExact evaluates Claim 1 exactly for Gamma step times of st's mean
// and variance: E[max of n Gamma(s, θ)] = θ·∫₀^∞ (1 − P(s, x)ⁿ) dx, with
// P the regularized lower incomplete gamma function, integrated
// numerically (adaptive Simpson in ln x, relative error below 1e-7).
// Sync uses s = k, HTS s = α·k divided by α, each plus overhead. It differs
// from the Monte Carlo integral (Predict) only where st's distribution is
// not Gamma (lognormal, a tail), where it keeps the mean and variance but
// not the shape of the tail.
func GammaExact(st env.StepTime, n, alpha int, overhead time.Duration) Prediction {
	m, k, theta, varies := gammaFit(st)
	if n <= 1 || !varies {
		d := time.Duration(m) + overhead
		return Prediction{Sync: d, HTS: d}
	}
	a := float64(max(alpha, 1))
	return Prediction{
		Sync: time.Duration(theta*gammaMaxMean(k, n)) + overhead,
		HTS:  time.Duration(theta*gammaMaxMean(a*k, n)/a) + overhead,
	}
}

// gammaMaxMean is E[max of n independent Gamma(s, 1)] = ∫₀^∞ (1 − P(s,
// x)ⁿ) dx, integrated over t = ln x so that the steep start of small
// shapes and the long body of large ones get the same resolution.
func gammaMaxMean(s float64, n int) float64 {
	f := func(t float64) float64 {
		x := math.Exp(t)
		return (1 - math.Pow(gammaP(s, x), float64(n))) * x
	}
	// Below e^-40 the integrand is under e^-40; above hi the chance that
	// any of the n variables exceeds x is below 1e-12 of the mean.
	hi := gammaQuantile(s, 1-1e-13/float64(n))
	lo, up := -40.0, math.Log(hi)
	// Panels of width ≤ 0.25 in t keep the adaptive steps from missing the
	// narrow rise of a large shape.
	panels := int(math.Ceil((up - lo) / 0.25))
	w := (up - lo) / float64(panels)
	var sum float64
	for i := range panels {
		a, b := lo+float64(i)*w, lo+float64(i+1)*w
		fa, fm, fb := f(a), f((a+b)/2), f(b)
		sum += adaptiveSimpson(f, a, b, fa, fm, fb, simpson(a, b, fa, fm, fb), 1e-9*max(s, 1), 30)
	}
	return sum
}

func simpson(a, b, fa, fm, fb float64) float64 { return (b - a) / 6 * (fa + 4*fm + fb) }

// adaptiveSimpson integrates f over [a, b] to absolute error eps, given f
// at a, the midpoint and b and the Simpson estimate whole.
func adaptiveSimpson(f func(float64) float64, a, b, fa, fm, fb, whole, eps float64, depth int) float64 {
	m := (a + b) / 2
	lm, rm := f((a+m)/2), f((m+b)/2)
	left, right := simpson(a, m, fa, lm, fm), simpson(m, b, fm, rm, fb)
	if depth <= 0 || math.Abs(left+right-whole) <= 15*eps {
		return left + right + (left+right-whole)/15
	}
	return adaptiveSimpson(f, a, m, fa, lm, fm, left, eps/2, depth-1) +
		adaptiveSimpson(f, m, b, fm, rm, fb, right, eps/2, depth-1)
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
