package hts

import (
	"math"
	"testing"
	"time"

	"herd/env"
	"herd/internal/rng"
)

// TestClosedForm pins Claim 1's closed form (Eq. 7, the Gamma
// extreme-value approximation): for exponential step times (Gamma, CV 1)
// the synchronous expectation E[max of n] is θ·H_n exactly, which the
// Gumbel approximation gives within 3% for n ≥ 8 (b_n + γ·a_n = θ(ln n + γ)
// there); across distributions, CVs and α it stays within 10% of the Monte
// Carlo integral of the same expectations (Predict) — 15% for CV 2, whose
// shape 1/4 the Gumbel limit reaches slowly — and the overhead adds once
// per step.
func TestClosedForm(t *testing.T) {
	mean := time.Millisecond
	for _, n := range []int{8, 16, 64} {
		p := ClosedForm(env.StepTime{Mean: mean, CV: 1, Dist: "gamma"}, n, 1, 0)
		var h float64
		for i := 1; i <= n; i++ {
			h += 1 / float64(i)
		}
		if want := h * float64(mean); math.Abs(float64(p.Sync)-want) > 0.03*want {
			t.Errorf("n %d: exponential E[max] %v, want θ·H_n = %v", n, p.Sync, time.Duration(want))
		}
	}
	for _, c := range []struct {
		st       env.StepTime
		n, alpha int
		tol      float64
	}{
		{env.StepTime{Mean: mean, CV: 0.5, Dist: "gamma"}, 8, 5, 0.10},
		{env.StepTime{Mean: mean, CV: 2, Dist: "gamma"}, 8, 5, 0.15},
		{env.StepTime{Mean: mean, CV: 1, Dist: "gamma"}, 4, 128, 0.10},
		{env.StepTime{Mean: mean, CV: 1}, 16, 32, 0.10},
	} {
		cf := ClosedForm(c.st, c.n, c.alpha, 0)
		mc := Predict(c.st, c.n, c.alpha, 0, 4000, rng.New(1, "test/claim", 0))
		for _, x := range [][2]time.Duration{{cf.Sync, mc.Sync}, {cf.HTS, mc.HTS}} {
			if math.Abs(float64(x[0]-x[1])) > c.tol*float64(x[1]) {
				t.Errorf("%+v n %d α %d: closed form %v, Monte Carlo %v", c.st, c.n, c.alpha, x[0], x[1])
			}
		}
		if cf.HTS >= cf.Sync {
			t.Errorf("%+v: HTS %v not below sync %v", c.st, cf.HTS, cf.Sync)
		}
	}
	st := env.StepTime{Mean: mean, CV: 1, Dist: "gamma"}
	if d := ClosedForm(st, 8, 5, 100*time.Microsecond).Sync - ClosedForm(st, 8, 5, 0).Sync; d != 100*time.Microsecond {
		t.Errorf("overhead adds %v per step, want 100µs", d)
	}
	if p := ClosedForm(env.StepTime{Mean: mean}, 8, 5, 0); p.Sync != mean || p.HTS != mean {
		t.Errorf("CV 0: %+v, want the mean", p)
	}
}
