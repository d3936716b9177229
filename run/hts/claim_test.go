package hts

import (
	"math"
	"testing"
	"time"

	"herd/env"
	"herd/internal/rng"
)

// TestEq7 pins HTS-RL's Eq. 7 as written: for exponential steps (k = 1,
// θ = the mean) the synchronous step is θ·(ln n + γ) and the HTS step
// θ·(ln n + (α−1)·ln ln n − ln Γ(α) + γ)/α; the overhead adds once per
// step; CV 0 gives the mean; and where the limit falls below the mean (a
// handful of envs against a segment's shape α·k) it says so.
func TestEq7(t *testing.T) {
	mean := time.Millisecond
	st := env.StepTime{Mean: mean, CV: 1, Dist: "gamma"}
	for _, c := range []struct{ n, alpha int }{{8, 1}, {1000, 4}, {4096, 2}} {
		p := Eq7(st, c.n, c.alpha, 0)
		ok := p.SyncOK && p.HTSOK
		ln := math.Log(float64(c.n))
		lg, _ := math.Lgamma(float64(c.alpha))
		wantSync := float64(mean) * (ln + eulerGamma)
		wantHTS := float64(mean) * (ln + float64(c.alpha-1)*math.Log(ln) - lg + eulerGamma) / float64(c.alpha)
		if !ok || math.Abs(float64(p.Sync)-wantSync) > 1 || math.Abs(float64(p.HTS)-wantHTS) > 1 {
			t.Errorf("n %d α %d: Eq. 7 gave %+v (ok %v), want sync %v HTS %v", c.n, c.alpha, p, ok,
				time.Duration(wantSync), time.Duration(wantHTS))
		}
	}
	if d := mustEq7(t, st, 1000, 4, 100*time.Microsecond).Sync - mustEq7(t, st, 1000, 4, 0).Sync; d != 100*time.Microsecond {
		t.Errorf("overhead adds %v per step, want 100µs", d)
	}
	if p := mustEq7(t, env.StepTime{Mean: mean}, 8, 5, 0); p.Sync != mean || p.HTS != mean {
		t.Errorf("CV 0: %+v, want the mean", p)
	}
	for _, cv := range []float64{1, 3} {
		if p := Eq7(env.StepTime{Mean: mean, CV: cv, Dist: "gamma"}, 4, 128, 0); p.HTSOK || !p.SyncOK == (cv == 1) {
			t.Errorf("CV %v, 4 envs, α 128: Eq. 7 %+v; want the HTS side out of range, the sync side in range for CV 1", cv, p)
		}
	}
}

func mustEq7(t *testing.T, st env.StepTime, n, alpha int, overhead time.Duration) Prediction {
	t.Helper()
	p := Eq7(st, n, alpha, overhead)
	if !p.SyncOK || !p.HTSOK {
		t.Fatalf("Eq. 7 out of range for %+v n %d α %d", st, n, alpha)
	}
	return p.Prediction
}

// TestGammaExact checks the exact expectation against two closed forms
// that do not share its code — θ·H_n for exponential steps, and E[max of
// 2 Gamma(s, 1)] = s + Γ(s+½)/(√π·Γ(s)) for any shape — and against the
// Monte Carlo integral of the same Gamma steps (Predict).
func TestGammaExact(t *testing.T) {
	mean := time.Millisecond
	for _, n := range []int{2, 4, 8, 64} {
		p := GammaExact(env.StepTime{Mean: mean, CV: 1, Dist: "gamma"}, n, 1, 0)
		var h float64
		for i := 1; i <= n; i++ {
			h += 1 / float64(i)
		}
		if want := h * float64(mean); math.Abs(float64(p.Sync)-want) > 1e-6*want {
			t.Errorf("n %d: exponential E[max] %v, want θ·H_n = %v", n, p.Sync, time.Duration(want))
		}
	}
	for _, s := range []float64{1.0 / 9, 0.25, 1, 4, 512} {
		got := gammaMaxMean(s, 2)
		a, _ := math.Lgamma(s + 0.5)
		b, _ := math.Lgamma(s)
		want := s + math.Exp(a-b)/math.Sqrt(math.Pi)
		if math.Abs(got-want) > 1e-6*want {
			t.Errorf("shape %v: E[max of 2] %v, want %v", s, got, want)
		}
	}
	for _, c := range []struct {
		cv       float64
		n, alpha int
	}{{0.5, 8, 5}, {2, 8, 5}, {3, 4, 128}, {1, 16, 32}} {
		st := env.StepTime{Mean: mean, CV: c.cv, Dist: "gamma"}
		ex := GammaExact(st, c.n, c.alpha, 0)
		mc := Predict(st, c.n, c.alpha, 0, 4000, rng.New(1, "test/claim", 0))
		for _, x := range [][2]time.Duration{{ex.Sync, mc.Sync}, {ex.HTS, mc.HTS}} {
			if math.Abs(float64(x[0]-x[1])) > 0.05*float64(x[1]) {
				t.Errorf("CV %v n %d α %d: exact %v, Monte Carlo %v", c.cv, c.n, c.alpha, x[0], x[1])
			}
		}
		if ex.HTS >= ex.Sync {
			t.Errorf("CV %v: HTS %v not below sync %v", c.cv, ex.HTS, ex.Sync)
		}
	}
}
