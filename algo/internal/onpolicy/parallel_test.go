package onpolicy

import (
	"testing"

	"herd/env"
	"herd/internal/rng"
	"herd/nn"
)

// TestParallelAgentMatchesSequential: the same minibatch pass with and
// without the worker gives bit-identical gradients.
func TestParallelAgentMatchesSequential(t *testing.T) {
	grads := func(parallel bool) [][]float32 {
		a, err := NewAgent(env.UniformBox(-1, 1, 4), env.Discrete{N: 3},
			AgentConfig{Hidden: []int{16, 16}, Act: nn.Tanh, OrthoInit: true, Parallel: parallel}, rng.New(1, "test/par", 0))
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		r := rng.New(2, "test/data", 0)
		const B = 9
		obs, acts := make([]float32, B*4), make([]float32, B)
		for i := range obs {
			obs[i] = float32(r.NormFloat64())
		}
		for i := range acts {
			acts[i] = float32(r.IntN(3))
		}
		lp, ent, v := make([]float32, B), make([]float32, B), make([]float32, B)
		a.Evaluate(lp, ent, v, obs, acts, B)
		dl, de, dv := make([]float32, B), make([]float32, B), make([]float32, B)
		for i := range dl {
			dl[i], de[i], dv[i] = lp[i], -0.01, v[i]
		}
		a.ZeroGrad()
		a.Backward(dl, de, dv)
		var out [][]float32
		for _, p := range a.Params() {
			out = append(out, append([]float32(nil), p.Grad...))
		}
		return out
	}
	seq, par := grads(false), grads(true)
	for i := range seq {
		for j := range seq[i] {
			if seq[i][j] != par[i][j] {
				t.Fatalf("param %d grad %d: %v sequential, %v parallel", i, j, seq[i][j], par[i][j])
			}
		}
	}
}

// TestLearnMatchesEvaluateBackward: Learn zeroes the gradients (log-std
// included) and computes what Evaluate + ZeroGrad + Backward compute.
func TestLearnMatchesEvaluateBackward(t *testing.T) {
	newAgent := func(parallel bool) *Agent {
		a, err := NewAgent(env.UniformBox(-1, 1, 3), env.UniformBox(-2, 2, 2),
			AgentConfig{Hidden: []int{8}, Act: nn.Tanh, OrthoInit: true, Parallel: parallel}, rng.New(1, "test/learn", 0))
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	const B = 5
	r := rng.New(3, "test/data", 0)
	obs, acts := make([]float32, B*3), make([]float32, B*2)
	for i := range obs {
		obs[i] = float32(r.NormFloat64())
	}
	for i := range acts {
		acts[i] = float32(r.NormFloat64())
	}
	policy, value := testLosses(B)

	ref := newAgent(false)
	lp, ent, v := make([]float32, B), make([]float32, B), make([]float32, B)
	ref.Evaluate(lp, ent, v, obs, acts, B)
	dl, de, dv := make([]float32, B), make([]float32, B), make([]float32, B)
	policy(dl, de, lp, ent)
	value(dv, v)
	ref.ZeroGrad()
	ref.Backward(dl, de, dv)

	for _, parallel := range []bool{false, true} {
		a := newAgent(parallel)
		a.Learn(obs, acts, B, policy, value)
		a.Learn(obs, acts, B, policy, value) // twice: gradients must not accumulate
		a.Close()
		for i, p := range a.Params() {
			for j := range p.Grad {
				if p.Grad[j] != ref.Params()[i].Grad[j] {
					t.Fatalf("parallel=%v %s grad %d: %v, want %v", parallel, p.Name, j, p.Grad[j], ref.Params()[i].Grad[j])
				}
			}
		}
	}
}

// testLosses are the loss gradients of L = mean(log π) + 0.1·mean(H) +
// mean(V²)/2 over b rows, for Learn.
func testLosses(b int) (PolicyLoss, ValueLoss) {
	policy := func(dLogProb, dEntropy, _, _ []float32) {
		for i := range dLogProb {
			dLogProb[i], dEntropy[i] = 1/float32(b), 0.1/float32(b)
		}
	}
	value := func(dValue, v []float32) {
		for i := range dValue {
			dValue[i] = v[i] / float32(b)
		}
	}
	return policy, value
}
