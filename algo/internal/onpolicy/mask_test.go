package onpolicy

import (
	"math"
	"slices"
	"testing"

	"herd/algo"
	"herd/env"
	"herd/internal/rng"
	"herd/nn"
)

// TestActionMask: rows with an action mask (env FlatOptions.ActionMask)
// give the masked actions probability 0 in the policy's rows, the
// sampler never draws them, the greedy action avoids them even where
// their raw logit is the largest, and the learner's log π and entropy
// are those of the distribution renormalized over the legal actions.
func TestActionMask(t *testing.T) {
	rows := env.RowLayout{Agents: 2, Obs: 3, AgentID: true, Mask: 4}
	sp := algo.Spaces{Obs: env.UniformBox(-5, 5, rows.Width()), Act: env.Discrete{N: 4}, Rows: rows}
	cfg := AgentConfig{Hidden: []int{8}, Act: nn.Tanh, OrthoInit: false}
	p, err := NewPolicy(sp, cfg, rng.New(1, "test/init", 0))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := NewAgent(sp.Obs, sp.Act, cfg, rng.New(1, "test/init", 0)) // the same weights, no mask
	if err != nil {
		t.Fatal(err)
	}
	obs := []float32{0.3, -1.2, 2, 1, 0, 0, 0, 0, 0}
	raw := slices.Clone(plain.actor.Forward(obs[:rows.Width()], 1))
	best := slices.Index(raw, slices.Max(raw))
	const n = 64
	batch := make([]float32, 0, n*rows.Width())
	legal := make([][]bool, n)
	for r := range n {
		row := slices.Clone(obs)
		legal[r] = make([]bool, 4)
		for k := range 4 {
			legal[r][k] = k != best && (k+r)%3 != 0 || k == (r+1)%4 && k != best
			if legal[r][k] {
				row[5+k] = 1
			}
		}
		row[0] += float32(r) / n
		batch = append(batch, row...)
	}
	out := p.ForwardTo(make([]float32, n*p.OutDim()), batch, n)
	s, err := NewSampler(sp, rng.New(1, "test/sampler", 0))
	if err != nil {
		t.Fatal(err)
	}
	var acts algo.Acts
	for range 50 {
		s.SampleTo(&acts, out, n, 0)
		for r := range n {
			if a := int(acts.Actions[r]); !legal[r][a] {
				t.Fatalf("row %d: sampled the masked action %d (legal %v)", r, a, legal[r])
			}
		}
	}
	// log π and H of every legal action against the renormalized
	// distribution of the unmasked network's logits.
	logits := plain.actor.Forward(batch, n)
	lp, ent, val := make([]float32, n), make([]float32, n), make([]float32, n)
	acts.Actions = acts.Actions[:n]
	p.agent.Evaluate(lp, ent, val, batch, acts.Actions, n)
	for r := range n {
		z, h := math.Inf(-1), 0.0
		for k := range 4 {
			if legal[r][k] {
				z = logAddExp(z, float64(logits[r*4+k]))
			}
		}
		for k := range 4 {
			if legal[r][k] {
				q := float64(logits[r*4+k]) - z
				h -= math.Exp(q) * q
			}
		}
		a := int(acts.Actions[r])
		if want := float64(logits[r*4+a]) - z; math.Abs(float64(lp[r])-want) > 1e-5 || math.Abs(float64(ent[r])-h) > 1e-5 {
			t.Fatalf("row %d: log π %v H %v, want %v %v", r, lp[r], ent[r], want, h)
		}
	}
	if a := p.Act(make([]float32, 1), batch[:rows.Width()]); int(a[0]) == best || !legal[0][int(a[0])] {
		t.Fatalf("greedy action %v: masked (the raw argmax is %d)", a, best)
	}
	if _, err := NewAgent(sp.Obs, sp.Act, withRows(cfg, env.RowLayout{Agents: 2, Obs: 3, Mask: 5}), rng.New(1, "x", 0)); err == nil {
		t.Fatal("a mask of 5 values for 4 actions was accepted")
	}
}

func logAddExp(a, b float64) float64 {
	if math.IsInf(a, -1) {
		return b
	}
	m := max(a, b)
	return m + math.Log(math.Exp(a-m)+math.Exp(b-m))
}
