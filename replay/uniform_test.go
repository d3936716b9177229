package replay

import (
	"errors"
	"testing"

	"herd/internal/rng"
	"herd/replay/internal/stattest"
)

func TestUniformErrorsAndFrequencies(t *testing.T) {
	u, err := NewUniform(Config{Capacity: 50, ObsSize: 2, ActSize: 3})
	if err != nil {
		t.Fatal(err)
	}
	r := rng.New(21, "replay/test/uniform", 0)
	var s Sample
	if err := u.Sample(&s, 1, r); !errors.Is(err, ErrEmpty) {
		t.Errorf("empty: %v", err)
	}
	if err := u.Add(makeBatch(3, 2, 1, 0)); !errors.Is(err, ErrShape) {
		t.Errorf("wrong action size: %v", err)
	}
	if err := u.Add(makeBatch(40, 2, 3, 0)); err != nil {
		t.Fatal(err)
	}
	if err := u.Sample(&s, 41, r); !errors.Is(err, ErrTooMany) {
		t.Errorf("41 of 40: %v", err)
	}
	counts := make([]int, 50)
	for k := 0; k < 4000; k++ {
		if err := u.Sample(&s, 40, r); err != nil {
			t.Fatal(err)
		}
		for i, slot := range s.Index {
			if id := checkRow(&s, i, 2, 3); id != slot || s.Weight[i] != 1 || s.Prob[i] != 1.0/40 {
				t.Fatalf("row %d: id %d slot %d weight %v prob %v", i, id, slot, s.Weight[i], s.Prob[i])
			}
			counts[slot]++
		}
	}
	probs := make([]float64, 50)
	for i := range 40 {
		probs[i] = 1.0 / 40
	}
	if stat, pv := stattest.ChiSquare(counts, probs); pv < 1e-3 {
		t.Errorf("uniform frequencies: chi2 %.1f p %.2g", stat, pv)
	}
}
