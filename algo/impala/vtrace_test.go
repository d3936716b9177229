package impala

import (
	"math"
	"math/rand/v2"
	"testing"

	"herd/internal/rng"
)

// randomSegment draws a T×n segment with episode ends.
func randomSegment(r *rand.Rand, T, n int) (rewards, values, dones, boot []float32) {
	rewards, values, dones = make([]float32, T*n), make([]float32, T*n), make([]float32, T*n)
	boot = make([]float32, n)
	for k := range rewards {
		rewards[k] = float32(r.NormFloat64())
		values[k] = float32(r.NormFloat64())
		if r.Float64() < 0.15 {
			dones[k] = 1
		}
	}
	for i := range boot {
		boot[i] = float32(r.NormFloat64())
	}
	return
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-5*max(1, math.Abs(b)) }

// TestVTraceOnPolicyIsNStep: with π = μ (log ρ = 0) and c̄ ≥ 1, every ρ_t and
// c_t is 1 and v_s is the on-policy n-step bootstrapped return
// Σ_{t=s}^{T−1} γ^{t−s} r_t + γ^{T−s} V(x_T), cut at episode ends (IMPALA §4.1).
func TestVTraceOnPolicyIsNStep(t *testing.T) {
	r := rng.New(1, "test/vtrace", 0)
	const T, n, gamma = 7, 3, float32(0.9)
	rewards, values, dones, boot := randomSegment(r, T, n)
	logRhos := make([]float32, T*n)
	vs, adv := make([]float32, T*n), make([]float32, T*n)
	VTrace(vs, adv, logRhos, rewards, values, dones, boot, n, gamma, 1, 1)
	for i := range n {
		for s := range T {
			// Forward: the discounted sum until the episode ends or the
			// segment does.
			ret, disc := 0.0, 1.0
			ended := false
			for t := s; t < T; t++ {
				k := t*n + i
				ret += disc * float64(rewards[k])
				disc *= float64(gamma)
				if dones[k] == 1 {
					ended = true
					break
				}
			}
			if !ended {
				ret += disc * float64(boot[i])
			}
			if k := s*n + i; !near(float64(vs[k]), ret) {
				t.Errorf("env %d step %d: v_s %v, n-step return %v", i, s, vs[k], ret)
			}
		}
	}
}

// TestVTraceUntruncatedIsImportanceSampled: with ρ̄ = c̄ = ∞ and V ≡ 0 (no
// control variate), v_s is the per-decision importance-sampled return
// Σ_{t≥s} γ^{t−s} (Π_{i=s}^{t} π_i/μ_i) r_t (Precup et al. 2000); with V ≠ 0
// it is eq. 1's sum Σ γ^{t−s} (Π_{i<t} c_i) δ_t computed term by term.
func TestVTraceUntruncatedIsImportanceSampled(t *testing.T) {
	r := rng.New(2, "test/vtrace", 0)
	const T, n, gamma = 6, 2, float32(0.95)
	inf := float32(math.Inf(1))
	rewards, values, _, boot := randomSegment(r, T, n)
	dones := make([]float32, T*n) // one episode throughout
	logRhos := make([]float32, T*n)
	for k := range logRhos {
		logRhos[k] = float32(0.5 * r.NormFloat64())
	}
	zeros := make([]float32, T*n)
	vs, adv := make([]float32, T*n), make([]float32, T*n)
	VTrace(vs, adv, logRhos, rewards, zeros, dones, make([]float32, n), n, gamma, inf, inf)
	for i := range n {
		for s := range T {
			want, w, disc := 0.0, 1.0, 1.0
			for t := s; t < T; t++ {
				w *= math.Exp(float64(logRhos[t*n+i]))
				want += disc * w * float64(rewards[t*n+i])
				disc *= float64(gamma)
			}
			if k := s*n + i; !near(float64(vs[k]), want) {
				t.Errorf("V=0: env %d step %d: v_s %v, importance-sampled return %v", i, s, vs[k], want)
			}
		}
	}
	VTrace(vs, adv, logRhos, rewards, values, dones, boot, n, gamma, inf, inf)
	for i := range n {
		V := func(t int) float64 {
			if t == T {
				return float64(boot[i])
			}
			return float64(values[t*n+i])
		}
		for s := range T {
			want, cs, disc := V(s), 1.0, 1.0
			for t := s; t < T; t++ {
				rho := math.Exp(float64(logRhos[t*n+i]))
				want += disc * cs * rho * (float64(rewards[t*n+i]) + float64(gamma)*V(t+1) - V(t))
				cs *= rho
				disc *= float64(gamma)
			}
			if k := s*n + i; !near(float64(vs[k]), want) {
				t.Errorf("eq. 1: env %d step %d: v_s %v, term by term %v", i, s, vs[k], want)
			}
		}
	}
}

// TestVTraceByHand: a 3-step example worked by hand. γ = 0.9,
// r = (1, 0, 2), V = (0.5, 1, 1.5), V(x_3) = 2, π/μ = (2, 0.5, 1), ρ̄ = c̄ = 1,
// so ρ = c = (1, 0.5, 1):
//
//	δ_2 = 1·(2 + 0.9·2 − 1.5)       = 2.3      v_2 = 1.5 + 2.3                = 3.8
//	δ_1 = 0.5·(0 + 0.9·1.5 − 1)     = 0.175    v_1 = 1 + 0.175 + 0.9·0.5·2.3  = 2.21
//	δ_0 = 1·(1 + 0.9·1 − 0.5)       = 1.4      v_0 = 0.5 + 1.4 + 0.9·1·1.21   = 2.989
//	A_0 = 1·(1 + 0.9·2.21 − 0.5) = 2.489, A_1 = 0.5·(0 + 0.9·3.8 − 1) = 1.21,
//	A_2 = 1·(2 + 0.9·2 − 1.5) = 2.3
func TestVTraceByHand(t *testing.T) {
	logRhos := []float32{float32(math.Log(2)), float32(math.Log(0.5)), 0}
	vs, adv := make([]float32, 3), make([]float32, 3)
	VTrace(vs, adv, logRhos, []float32{1, 0, 2}, []float32{0.5, 1, 1.5}, []float32{0, 0, 0}, []float32{2}, 1, 0.9, 1, 1)
	for k, want := range []float64{2.989, 2.21, 3.8} {
		if !near(float64(vs[k]), want) {
			t.Errorf("v_%d = %v, want %v", k, vs[k], want)
		}
	}
	for k, want := range []float64{2.489, 1.21, 2.3} {
		if !near(float64(adv[k]), want) {
			t.Errorf("A_%d = %v, want %v", k, adv[k], want)
		}
	}
	// An episode end at step 1 cuts the bootstrap: v_1 = V_1 + ρ_1 (r_1 − V_1).
	VTrace(vs, adv, logRhos, []float32{1, 0, 2}, []float32{0.5, 1, 1.5}, []float32{0, 1, 0}, []float32{2}, 1, 0.9, 1, 1)
	if want := 1 + 0.5*(0-1.0); !near(float64(vs[1]), want) {
		t.Errorf("v_1 at an episode end = %v, want %v", vs[1], want)
	}
}

// TestVTraceTimeLimitBootstraps: an episode cut by a time limit at the
// segment's last step, as the workers hand it over — γ·V(final
// observation) folded into the reward and the step marked done — gets the
// same targets and advantages, off-policy too, as a segment that simply
// continues into the final observation (bootstrap V(x_T) = V(final)): a
// time limit is not a terminal state (Pardo et al. 2018). Cutting without
// the folded bootstrap, as at a termination, gives other targets.
func TestVTraceTimeLimitBootstraps(t *testing.T) {
	const T, gamma = 6, 0.9
	r := rng.New(1, "test/vtrace-timelimit", 0)
	rewards, values, _, _ := randomSegment(r, T, 1)
	logRhos := make([]float32, T)
	for k := range logRhos {
		logRhos[k] = float32(0.5 * r.NormFloat64())
	}
	vFinal := float32(3.7)
	vsCont, advCont := make([]float32, T), make([]float32, T)
	VTrace(vsCont, advCont, logRhos, rewards, values, make([]float32, T), []float32{vFinal}, 1, gamma, 1, 1)

	folded := append([]float32(nil), rewards...)
	folded[T-1] += gamma * vFinal
	dones := make([]float32, T)
	dones[T-1] = 1
	vs, adv := make([]float32, T), make([]float32, T)
	VTrace(vs, adv, logRhos, folded, values, dones, []float32{-50}, 1, gamma, 1, 1) // the reset env's value must not matter
	for k := range T {
		if !near(float64(vs[k]), float64(vsCont[k])) || !near(float64(adv[k]), float64(advCont[k])) {
			t.Errorf("step %d: v %v, A %v with the folded bootstrap; continuing: v %v, A %v", k, vs[k], adv[k], vsCont[k], advCont[k])
		}
	}
	VTrace(vs, adv, logRhos, rewards, values, dones, []float32{vFinal}, 1, gamma, 1, 1)
	if near(float64(vs[T-1]), float64(vsCont[T-1])) {
		t.Errorf("a cut without the bootstrap gave the same last target %v", vs[T-1])
	}
}
