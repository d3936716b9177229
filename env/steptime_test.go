package env

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"herd/internal/rng"
)

func TestStepTimeMoments(t *testing.T) {
	for _, dist := range []string{"lognormal", "gamma"} {
		for _, cv := range []float64{0.5, 1, 2, 3} {
			st := StepTime{Mean: time.Millisecond, CV: cv, Dist: dist}
			r := rng.New(1, "env/step-time-test", 0)
			const n = 400000
			var sum, sum2 float64
			for range n {
				x := float64(st.Draw(r)) / float64(time.Millisecond)
				sum += x
				sum2 += x * x
			}
			mean := sum / n
			std := math.Sqrt(sum2/n - mean*mean)
			// Heavy-tailed estimates converge slowly: the sample CV of a
			// log-normal with cv 3 is noisy, so its tolerance is wider.
			tol := 0.03 + 0.05*cv*cv
			if math.Abs(mean-1) > 0.03*cv || math.Abs(std/mean-cv) > tol*cv {
				t.Errorf("%s cv %v: sample mean %.4f ms, cv %.3f", dist, cv, mean, std/mean)
			}
		}
	}
}

func TestStepTimeValidate(t *testing.T) {
	for _, st := range []StepTime{{}, {Mean: -1}, {Mean: 1, CV: -1}, {Mean: 1, CV: math.NaN()},
		{Mean: 1, Dist: "pareto"}, {Mean: 1, TailProb: 2}, {Mean: 1, TailProb: 0.1, TailFactor: 0.5},
		// Beyond any simulator, or overflowing the Duration a draw becomes
		// (it used to turn into no delay at all).
		{Mean: 1000 * time.Hour, CV: 1e300}, {Mean: 1000 * time.Hour}, {Mean: time.Millisecond, CV: 1e300},
		{Mean: time.Millisecond, CV: math.Inf(1)}, {Mean: time.Millisecond, CV: 11},
		{Mean: time.Millisecond, TailProb: 0.1, TailFactor: 1e300}, {Mean: time.Millisecond, TailProb: 0.1},
		{Mean: time.Millisecond, TailProb: 0.1, TailFactor: math.Inf(1)}} {
		if err := st.Validate(); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("%+v: %v, want ErrInvalidOption", st, err)
		}
		if _, err := Make("CartPole-v1", WithStepTime(st)); err == nil {
			t.Errorf("Make with %+v succeeded", st)
		}
	}
}

// TestStepTimeDrawsAtTheBounds: at the largest mean, CV and tail factor
// a StepTime accepts, every draw is a positive duration no longer than a
// day: the float never overflows into a zero or negative sleep.
func TestStepTimeDrawsAtTheBounds(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, dist := range []string{"lognormal", "gamma"} {
		st := StepTime{Mean: MaxStepTimeMean, CV: MaxStepTimeCV, Dist: dist, TailProb: 1, TailFactor: MaxStepTimeTailFactor}
		if err := st.Validate(); err != nil {
			t.Fatal(err)
		}
		for range 100000 {
			if d := st.Draw(r); d < 0 || d > 24*time.Hour {
				t.Fatalf("%s: draw %v", dist, d)
			}
		}
	}
}

// TestStepTimeKeepsDynamics steps CartPole with and without the wrapper
// and compares every transition.
func TestStepTimeKeepsDynamics(t *testing.T) {
	plain, err := Make("CartPole-v1")
	if err != nil {
		t.Fatal(err)
	}
	timed, err := Make("CartPole-v1", WithStepTime(StepTime{Mean: time.Microsecond, CV: 2, TailProb: 0.1, TailFactor: 5}))
	if err != nil {
		t.Fatal(err)
	}
	o1, _, _ := plain.Reset(3)
	o2, _, _ := timed.Reset(3)
	r := rng.New(1, "env/step-time-test", 1)
	for step := range 300 {
		if !equal32(o1, o2) {
			t.Fatalf("step %d: observations differ: %v vs %v", step, o1, o2)
		}
		a := []float32{float32(r.IntN(2))}
		var r1, r2 float64
		var d1, d2, tr1, tr2 bool
		o1, r1, d1, tr1, _, _ = plain.Step(a)
		o2, r2, d2, tr2, _, _ = timed.Step(a)
		if r1 != r2 || d1 != d2 || tr1 != tr2 {
			t.Fatalf("step %d: (%v %v %v) vs (%v %v %v)", step, r1, d1, tr1, r2, d2, tr2)
		}
		if d1 || tr1 {
			o1, _, _ = plain.Reset(int64(step))
			o2, _, _ = timed.Reset(int64(step))
		}
	}
}

func equal32(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func BenchmarkStepTimeDraw(b *testing.B) {
	st := StepTime{Mean: time.Millisecond, CV: 2, Dist: "gamma"}
	r := rng.New(1, "env/step-time-bench", 0)
	for b.Loop() {
		_ = st.Draw(r)
	}
}
