package all

import (
	"context"
	"errors"
	"testing"

	"herd/algo"
	"herd/weights"
)

// stateValues flattens a state version's values.
func stateValues(v *weights.Version) []float32 {
	var out []float32
	for i := range v.Len() {
		out = append(out, v.Param(i).Value...)
	}
	return out
}

// TestOffPolicySplitLearners: every off-policy learner is a SplitLearner
// whose Due schedule makes as many updates as Learn over the same steps;
// one learner applying its own gradients (slot 0), phase by phase (the
// actor's after the critic step), reproduces Learn bit for bit, with
// Learn's optimizer and target steps.
// A state copied into a fresh learner reproduces it exactly.
func TestOffPolicySplitLearners(t *testing.T) {
	ctx := context.Background()
	for _, c := range offCases {
		p, sp := c.pieces(t, 1000)
		newL := func() algo.SplitLearner {
			l, err := p.NewTransitionLearner()
			if err != nil {
				t.Fatal(err)
			}
			s, ok := l.(algo.SplitLearner)
			if !ok {
				t.Fatalf("%s: learner %T is not an algo.SplitLearner", c.name, l)
			}
			return s
		}
		newRB := func() algo.Replay {
			rb, err := p.NewReplay()
			if err != nil {
				t.Fatal(err)
			}
			fillReplay(t, p, sp, rb, 200)
			return rb
		}
		ref, split := newL(), newL()
		rbRef, rbSplit := newRB(), newRB()
		split.SetSlot(0)
		g := split.NewGrad()
		before := stateValues(split.State())
		var tickets []algo.Ticket
		next := uint64(1)
		for prev := int64(0); prev < 160; prev++ {
			if _, err := ref.Learn(ctx, rbRef, prev, prev+1); err != nil {
				t.Fatal(err)
			}
			tickets = split.Due(tickets[:0], rbSplit, prev, prev+1, next)
			for _, tk := range tickets {
				if tk.Index != next {
					t.Fatalf("%s: ticket %d, want %d", c.name, tk.Index, next)
				}
				next++
				for tk.Phase = 0; tk.Phase < algo.Phases(split, tk); tk.Phase++ {
					if err := split.Grad(ctx, rbSplit, tk, g); err != nil {
						t.Fatal(err)
					}
					if _, err := split.Apply(g); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		if r, s := ref.Weights().N, split.Weights().N; r != s || s == 0 || next-1 != s {
			t.Errorf("%s: %d updates by Learn, %d by Grad/Apply (%d tickets)", c.name, r, s, next-1)
		}
		got := stateValues(split.State())
		changed, same := false, true
		refState := stateValues(ref.(algo.SplitLearner).State())
		for i := range got {
			changed = changed || got[i] != before[i]
			same = same && got[i] == refState[i]
		}
		if !changed {
			t.Errorf("%s: Grad/Apply changed no parameter", c.name)
		}
		if !same {
			t.Errorf("%s: Grad/Apply differs from Learn in bits", c.name)
		}
		if rc, sc := ref.(algo.UpdateCounter).UpdateCounts(), split.(algo.UpdateCounter).UpdateCounts(); rc != sc {
			t.Errorf("%s: Learn took %+v steps, Grad/Apply %+v", c.name, rc, sc)
		}
		// A fresh learner set to the state computes the same gradient.
		other := newL()
		if err := other.SetState(split.State()); err != nil {
			t.Fatal(err)
		}
		other.SetSlot(5)
		split.SetSlot(5)
		g2 := other.NewGrad()
		rb2 := newRB()
		rb3 := newRB()
		tk := algo.Ticket{Step: 170, Index: next}
		if err := split.Grad(ctx, rb2, tk, g); err != nil {
			t.Fatal(err)
		}
		if err := other.Grad(ctx, rb3, tk, g2); err != nil {
			t.Fatal(err)
		}
		for i := range g.Parts {
			if g.Has[i] != g2.Has[i] {
				t.Fatalf("%s: part %d present %d and %d times", c.name, i, g.Has[i], g2.Has[i])
			}
			for j := range g.Parts[i] {
				if g.Has[i] > 0 && g.Parts[i][j] != g2.Parts[i][j] {
					t.Fatalf("%s: part %d value %d: %v from the learner, %v from its state", c.name, i, j, g.Parts[i][j], g2.Parts[i][j])
				}
			}
		}
		// Averaging a gradient with itself gives it back.
		avg := split.NewGrad()
		if err := algo.AverageGrads(avg, []*algo.Grad{g, g2}); err != nil {
			t.Fatal(err)
		}
		if avg.N != 2 || avg.Ticket != tk {
			t.Errorf("%s: average of 2: N %d, ticket %+v", c.name, avg.N, avg.Ticket)
		}
		for i := range g.Parts {
			for j := range g.Parts[i] {
				if g.Has[i] > 0 && avg.Parts[i][j] != g.Parts[i][j] {
					t.Fatalf("%s: average of a gradient with itself differs at part %d value %d", c.name, i, j)
				}
			}
		}
		if _, err := split.Apply(&algo.Grad{}); !errors.Is(err, algo.ErrGradShape) {
			t.Errorf("%s: Apply of a foreign gradient buffer: %v, want ErrGradShape", c.name, err)
		}
		for _, l := range []algo.SplitLearner{ref, split, other} {
			l.Close()
		}
	}
}

// TestAverageGrads: parts are averaged over the gradients that carry them,
// in the order given.
func TestAverageGrads(t *testing.T) {
	mk := func(vals []float32, has int) *algo.Grad {
		return &algo.Grad{N: 1, Parts: [][]float32{vals, {float32(has)}}, Has: []int{1, has}, Steps: []int{0, 2},
			Stats: []algo.Stat{{Name: "x", Value: float64(vals[0])}}}
	}
	dst := &algo.Grad{Parts: [][]float32{make([]float32, 2), make([]float32, 1)}, Has: make([]int, 2), Steps: make([]int, 2)}
	if err := algo.AverageGrads(dst, []*algo.Grad{mk([]float32{1, 2}, 0), mk([]float32{3, 6}, 1), mk([]float32{5, 1}, 1)}); err != nil {
		t.Fatal(err)
	}
	if dst.Parts[0][0] != 3 || dst.Parts[0][1] != 3 || dst.Parts[1][0] != 1 || dst.Has[1] != 2 || dst.N != 3 || dst.Stats[0].Value != 3 || dst.Steps[1] != 2 {
		t.Fatalf("average %+v", dst)
	}
	if err := algo.AverageGrads(dst, nil); err == nil {
		t.Error("average of nothing succeeded")
	}
}

// TestPhaseWithoutItsMinibatch: a later phase of an update (the actor's)
// on a learner that did not draw the update's minibatch in phase 0 is an
// error, not a gradient on a stale or empty minibatch.
func TestPhaseWithoutItsMinibatch(t *testing.T) {
	ctx := context.Background()
	for _, c := range offCases {
		p, sp := c.pieces(t, 1000)
		l, err := p.NewTransitionLearner()
		if err != nil {
			t.Fatal(err)
		}
		s := l.(algo.SplitLearner)
		rb, err := p.NewReplay()
		if err != nil {
			t.Fatal(err)
		}
		fillReplay(t, p, sp, rb, 200)
		g := s.NewGrad()
		// Updates 2, 4 … at steps 102, 104 … have an actor phase in each
		// algorithm that has phases (policy_frequency 2).
		first, second := algo.Ticket{Step: 102, Index: 2}, algo.Ticket{Step: 104, Index: 4}
		if algo.Phases(s, first) == 1 {
			if c.algo != "dqn" {
				t.Errorf("%s: update %+v has one phase", c.name, first)
			}
			s.Close()
			continue
		}
		first.Phase = 1
		if err := s.Grad(ctx, rb, first, g); err == nil {
			t.Errorf("%s: phase 1 with no phase 0 before it: no error", c.name)
		}
		second.Phase = 0
		if err := s.Grad(ctx, rb, second, g); err != nil {
			t.Fatal(err)
		}
		first.Phase = 1
		if err := s.Grad(ctx, rb, first, g); err == nil {
			t.Errorf("%s: phase 1 of update 2 after phase 0 of update 4: no error", c.name)
		}
		second.Phase = 1
		if err := s.Grad(ctx, rb, second, g); err != nil {
			t.Errorf("%s: phase 1 after its phase 0: %v", c.name, err)
		}
		s.Close()
	}
}
