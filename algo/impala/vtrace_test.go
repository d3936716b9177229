package impala

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"herd/algo"
	"herd/env"
	"herd/internal/rng"
	"herd/sample"
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
	VTrace(vs, adv, logRhos, rewards, values, dones, boot, n, gamma, 1, 1, 1)
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
	VTrace(vs, adv, logRhos, rewards, zeros, dones, make([]float32, n), n, gamma, inf, inf, 1)
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
	VTrace(vs, adv, logRhos, rewards, values, dones, boot, n, gamma, inf, inf, 1)
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
	VTrace(vs, adv, logRhos, []float32{1, 0, 2}, []float32{0.5, 1, 1.5}, []float32{0, 0, 0}, []float32{2}, 1, 0.9, 1, 1, 1)
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
	VTrace(vs, adv, logRhos, []float32{1, 0, 2}, []float32{0.5, 1, 1.5}, []float32{0, 1, 0}, []float32{2}, 1, 0.9, 1, 1, 1)
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
	VTrace(vsCont, advCont, logRhos, rewards, values, make([]float32, T), []float32{vFinal}, 1, gamma, 1, 1, 1)

	folded := append([]float32(nil), rewards...)
	folded[T-1] += gamma * vFinal
	dones := make([]float32, T)
	dones[T-1] = 1
	vs, adv := make([]float32, T), make([]float32, T)
	VTrace(vs, adv, logRhos, folded, values, dones, []float32{-50}, 1, gamma, 1, 1, 1) // the reset env's value must not matter
	for k := range T {
		if !near(float64(vs[k]), float64(vsCont[k])) || !near(float64(adv[k]), float64(advCont[k])) {
			t.Errorf("step %d: v %v, A %v with the folded bootstrap; continuing: v %v, A %v", k, vs[k], adv[k], vsCont[k], advCont[k])
		}
	}
	VTrace(vs, adv, logRhos, rewards, values, dones, []float32{vFinal}, 1, gamma, 1, 1, 1)
	if near(float64(vs[T-1]), float64(vsCont[T-1])) {
		t.Errorf("a cut without the bootstrap gave the same last target %v", vs[T-1])
	}
}

// vtraceReference is eq. 1 of the IMPALA paper written out term by term,
// O(T²) per env, with the traces of its Remark 2:
//
//	v_s = V(x_s) + Σ_{t=s}^{T−1} (Π_{i=s}^{t−1} γ_i·c_i)·δ_t,   δ_t = ρ_t·(r_t + γ_t·V(x_{t+1}) − V(x_t))
//	A_s = ρ_s·(r_s + γ_s·v_{s+1} − V(x_s))
//
// with ρ_t = min(ρ̄, π/μ), c_i = λ·min(c̄, π/μ), γ_t = γ·(1 − d_t) and
// v_T = V(x_T). Nothing is shared with VTrace's backward recursion.
func vtraceReference(logRhos, rewards, values, dones, boot []float32, n int, gamma, rhoBar, cBar, lambda float64) (vs, adv []float64) {
	T := len(rewards) / n
	vs, adv = make([]float64, T*n), make([]float64, T*n)
	for i := range n {
		at := func(x []float32, t int) float64 { return float64(x[t*n+i]) }
		V := func(t int) float64 {
			if t == T {
				return float64(boot[i])
			}
			return at(values, t)
		}
		ratio := func(t int) float64 { return math.Exp(at(logRhos, t)) }
		disc := func(t int) float64 { return gamma * (1 - at(dones, t)) }
		v := func(s int) float64 {
			if s == T {
				return V(T)
			}
			sum := V(s)
			for t := s; t < T; t++ {
				prod := 1.0
				for j := s; j < t; j++ {
					prod *= disc(j) * lambda * math.Min(cBar, ratio(j))
				}
				rho := math.Min(rhoBar, ratio(t))
				sum += prod * rho * (at(rewards, t) + disc(t)*V(t+1) - V(t))
			}
			return sum
		}
		for s := range T {
			vs[s*n+i] = v(s)
			adv[s*n+i] = math.Min(rhoBar, ratio(s)) * (at(rewards, s) + disc(s)*v(s+1) - V(s))
		}
	}
	return vs, adv
}

// TestVTraceReference: VTrace matches the term-by-term reference with
// ρ̄ ≠ c̄ (each larger than the other in turn, so truncating with the
// wrong one shows) and λ < 1, on segments with episode ends and
// importance ratios on both sides of both truncation levels.
func TestVTraceReference(t *testing.T) {
	const T, n = 9, 3
	for ci, c := range []struct{ gamma, rhoBar, cBar, lambda float32 }{
		{0.9, 0.8, 1.6, 0.7},
		{0.95, 2, 0.5, 0.9},
		{0.99, 1.3, 0.6, 1},
		{0.9, 0.7, 1.4, 0},
	} {
		r := rng.New(uint64(ci), "test/vtrace-reference", 0)
		rewards, values, dones, boot := randomSegment(r, T, n)
		logRhos := make([]float32, T*n)
		for k := range logRhos {
			logRhos[k] = float32(0.8 * r.NormFloat64()) // π/μ from about 0.1 to 10
		}
		vs, adv := make([]float32, T*n), make([]float32, T*n)
		VTrace(vs, adv, logRhos, rewards, values, dones, boot, n, c.gamma, c.rhoBar, c.cBar, c.lambda)
		wantVs, wantAdv := vtraceReference(logRhos, rewards, values, dones, boot, n,
			float64(c.gamma), float64(c.rhoBar), float64(c.cBar), float64(c.lambda))
		for k := range vs {
			if !near(float64(vs[k]), wantVs[k]) || !near(float64(adv[k]), wantAdv[k]) {
				t.Errorf("γ %v ρ̄ %v c̄ %v λ %v: env %d step %d: v %v A %v, reference v %v A %v",
					c.gamma, c.rhoBar, c.cBar, c.lambda, k%n, k/n, vs[k], adv[k], wantVs[k], wantAdv[k])
			}
		}
	}
}

// TestLearnerVTraceSettings: the learner computes its targets and
// advantages with the config's γ, ρ̄, c̄ and λ — ρ̄ ≠ c̄ and λ < 1, so that
// passing them to VTrace in the wrong order, or dropping one, shows — on a
// segment whose behaviour log-probabilities differ from the learner's π
// on both sides of both truncation levels: Learn's v and A match the
// term-by-term reference fed with the π and V the learner held before
// the step.
func TestLearnerVTraceSettings(t *testing.T) {
	e, err := env.Make("CartPole-v1")
	if err != nil {
		t.Fatal(err)
	}
	sp := algo.SpacesOf(e)
	e.Close()
	cfg := DefaultConfig()
	cfg.Gamma, cfg.RhoBar, cfg.CBar, cfg.Lambda = 0.9, 0.8, 1.6, 0.7
	const T, n = 7, 3
	l, err := newLearner(algo.Header{Seed: 1, Steps: 1000}, &cfg, sp)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	r := rng.New(1, "test/vtrace-learner", 0)
	seg := sample.NewSegment(T, n, 4, 1)
	for k := range seg.Obs {
		seg.Obs[k] = float32(r.NormFloat64())
	}
	for k := range seg.NextObs {
		seg.NextObs[k] = float32(r.NormFloat64())
	}
	seg.Rewards, _, seg.Dones, _ = randomSegment(r, T, n)
	for k := range seg.Actions {
		seg.Actions[k] = float32(r.IntN(2))
	}
	B := T * n
	logProb, ent, values, boot := make([]float32, B), make([]float32, B), make([]float32, B), make([]float32, n)
	l.Agent.Reserve(B)
	l.Agent.Evaluate(logProb, ent, values, seg.Obs, seg.Actions, B)
	l.Agent.Value(boot, seg.NextObs, n)
	logRho := make([]float32, B)
	for k := range logRho {
		logRho[k] = float32(0.8 * r.NormFloat64()) // π/μ from about 0.1 to 10
		seg.LogProbs[k] = logProb[k] - logRho[k]
	}
	if _, err := l.Learn(context.Background(), seg); err != nil {
		t.Fatal(err)
	}
	wantVs, wantAdv := vtraceReference(logRho, seg.Rewards, values, seg.Dones, boot, n,
		float64(cfg.Gamma), float64(cfg.RhoBar), float64(cfg.CBar), float64(cfg.Lambda))
	for k := range B {
		if !near(float64(l.vs[k]), wantVs[k]) || !near(float64(l.adv[k]), wantAdv[k]) {
			t.Errorf("env %d step %d: the learner's v %v A %v, reference v %v A %v", k%n, k/n, l.vs[k], l.adv[k], wantVs[k], wantAdv[k])
		}
	}
}
