package nn

import (
	"fmt"
	"math"
	"testing"

	"herd/internal/rng"
)

// TestCategoricalRowsSameBits: CategoricalRows gives Categorical's
// log-probabilities, entropies and gradients bit for bit, for rows on the
// stack buffers and wider ones, masked logits, and either gradient nil.
func TestCategoricalRowsSameBits(t *testing.T) {
	for _, n := range []int{2, 5, 40} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			r := rng.New(4, "nn/catrows", 0)
			const b = 9
			head := Categorical{N: n}
			logits := randn(r, b*n, 3)
			logits[n+1] = -1e9 // a masked action
			actions := make([]int, b)
			for i := range actions {
				actions[i] = r.IntN(n)
			}
			gl, ge := randn(r, b, 1), randn(r, b, 1)
			gl[2], ge[3] = 0, 0
			rows := CategoricalRows{N: n}
			rows.Eval(logits)
			same(t, "log π", rows.LogProbTo(make([]float32, b), actions), head.LogProbTo(make([]float32, b), logits, actions))
			same(t, "H", rows.EntropyTo(make([]float32, b)), head.EntropyTo(make([]float32, b), logits))
			for _, g := range []struct {
				name   string
				gl, ge []float32
				acts   []int
			}{{"both", gl, ge, actions}, {"log π only", gl, nil, actions}, {"H only", nil, ge, nil}} {
				same(t, "dlogits, "+g.name, rows.Backward(make([]float32, b*n), g.acts, g.gl, g.ge),
					head.Backward(make([]float32, b*n), logits, g.acts, g.gl, g.ge))
			}
		})
	}
}

func same(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Errorf("%s[%d] = %v, Categorical gives %v", what, i, got[i], want[i])
		}
	}
}

// TestCategoricalNoAllocs: Categorical's methods keep their row buffers on
// the stack, and CategoricalRows allocates only when a batch outgrows it.
func TestCategoricalNoAllocs(t *testing.T) {
	r := rng.New(5, "nn/catrows", 0)
	const b, n = 16, 4
	head := Categorical{N: n}
	logits, d := randn(r, b*n, 1), make([]float32, b*n)
	actions, gl, ge, out := make([]int, b), randn(r, b, 1), randn(r, b, 1), make([]float32, b)
	rows := CategoricalRows{N: n}
	if a := testing.AllocsPerRun(20, func() {
		head.Backward(d, logits, actions, gl, ge)
		head.EntropyTo(out, logits)
		rows.Eval(logits)
		rows.Backward(d, actions, gl, ge)
	}); a != 0 {
		t.Errorf("%v allocations per run, want 0", a)
	}
}

// BenchmarkCategoricalStep is one PPO minibatch's use of the head (128
// rows, 2 actions): log π and H, then their gradient, through Categorical
// (a log-sum-exp per row per call) and through CategoricalRows (one).
func BenchmarkCategoricalStep(b *testing.B) {
	r := rng.New(6, "nn/catrows", 0)
	const rows, n = 128, 2
	head := Categorical{N: n}
	logits, d := randn(r, rows*n, 1), make([]float32, rows*n)
	actions, gl, ge, lp, h := make([]int, rows), randn(r, rows, 1), randn(r, rows, 1), make([]float32, rows), make([]float32, rows)
	b.Run("Categorical", func(b *testing.B) {
		for b.Loop() {
			head.LogProbTo(lp, logits, actions)
			head.EntropyTo(h, logits)
			head.Backward(d, logits, actions, gl, ge)
		}
	})
	b.Run("CategoricalRows", func(b *testing.B) {
		c := CategoricalRows{N: n}
		for b.Loop() {
			c.Eval(logits)
			c.LogProbTo(lp, actions)
			c.EntropyTo(h)
			c.Backward(d, actions, gl, ge)
		}
	})
}
