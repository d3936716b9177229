package onpolicy

import (
	"math"
	"testing"

	"herd/internal/rng"
)

// naiveGAE is the definition, Â_t = Σ_k (γλ)^k δ_{t+k} summed until the
// episode ends or the rollout does, computed per env in float64 (the fast
// version is checked against it, as raft's quick tests check fast code
// against a naive one).
func naiveGAE(rewards, values, dones, last []float32, n int, gamma, lambda float64) []float64 {
	T := len(rewards) / n
	adv := make([]float64, len(rewards))
	v := func(t, i int) float64 {
		if t == T {
			return float64(last[i])
		}
		return float64(values[t*n+i])
	}
	for i := range n {
		for t := range T {
			var sum, w float64 = 0, 1
			for u := t; u < T; u++ {
				k := u*n + i
				nonTerm := 1 - float64(dones[k])
				delta := float64(rewards[k]) + gamma*v(u+1, i)*nonTerm - v(u, i)
				sum += w * delta
				if dones[k] == 1 {
					break
				}
				w *= gamma * lambda
			}
			adv[t*n+i] = sum
		}
	}
	return adv
}

func TestGAEMatchesDefinition(t *testing.T) {
	r := rng.New(1, "test/gae", 0)
	const T, n = 37, 3
	rewards, values, dones := make([]float32, T*n), make([]float32, T*n), make([]float32, T*n)
	last := []float32{0.5, -1, 2}
	for k := range rewards {
		rewards[k] = float32(r.NormFloat64())
		values[k] = float32(r.NormFloat64())
		if r.IntN(7) == 0 {
			dones[k] = 1
		}
	}
	for _, lambda := range []float32{0, 0.95, 1} {
		got := GAE(make([]float32, T*n), rewards, values, dones, last, n, 0.99, lambda)
		want := naiveGAE(rewards, values, dones, last, n, 0.99, float64(lambda))
		for k := range got {
			if math.Abs(float64(got[k])-want[k]) > 1e-4*(1+math.Abs(want[k])) {
				t.Fatalf("λ=%v: adv[%d] = %v, want %v", lambda, k, got[k], want[k])
			}
		}
	}
	// λ = 0 is the one-step TD error.
	got := GAE(make([]float32, T*n), rewards, values, dones, last, n, 0.9, 0)
	k := 4
	if want := rewards[k] + 0.9*values[k+n]*(1-dones[k]) - values[k]; got[k] != want {
		t.Fatalf("λ=0: %v, want δ = %v", got[k], want)
	}
}

func TestGAEPanicsOnBadLengths(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("want a panic for mismatched lengths")
		}
	}()
	GAE(make([]float32, 4), make([]float32, 4), make([]float32, 4), make([]float32, 4), make([]float32, 3), 2, 0.99, 0.95)
}

func TestNormalizeAndExplainedVariance(t *testing.T) {
	x := []float32{1, 2, 3, 4}
	got := NormalizeTo(make([]float32, 4), x)
	// mean 2.5, unbiased std √(5/3)
	s := math.Sqrt(5.0 / 3)
	for i, v := range x {
		if want := (float64(v) - 2.5) / s; math.Abs(float64(got[i])-want) > 1e-6 {
			t.Fatalf("normalized %v, want %v at %d", got, want, i)
		}
	}
	if ev := ExplainedVariance(x, x); ev != 1 {
		t.Fatalf("perfect critic: %v", ev)
	}
	if ev := ExplainedVariance([]float32{0, 0, 0, 0}, x); ev != 0 {
		t.Fatalf("zero critic: %v", ev)
	}
	if ev := ExplainedVariance(x, []float32{1, 1, 1, 1}); !math.IsNaN(ev) {
		t.Fatalf("constant returns: %v, want NaN", ev)
	}
}
