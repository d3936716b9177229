package replay

import (
	"testing"

	"herd/internal/rng"
)

// TestUniformSampleDraws: with every slot written, Sample's slots are the
// stream's draws in order (IntN(bound), one per row), whatever order it
// copies them in; a draw that lands on a slot reserved but not yet written
// (an actor mid-Add) is drawn again, and no row holds such a slot.
func TestUniformSampleDraws(t *testing.T) {
	const obs, act = 3, 1
	u, err := NewUniform(Config{Capacity: 64, ObsSize: obs, ActSize: act})
	if err != nil {
		t.Fatal(err)
	}
	if err := u.Add(makeBatch(40, obs, act, 0)); err != nil {
		t.Fatal(err)
	}
	var s Sample
	r, want := rng.New(1, "replay/draws", 0), rng.New(1, "replay/draws", 0)
	for range 20 {
		if err := u.Sample(&s, 32, r); err != nil {
			t.Fatal(err)
		}
		for i, slot := range s.Index {
			if w := want.IntN(40); slot != w {
				t.Fatalf("row %d: slot %d, the stream's draw is %d", i, slot, w)
			}
			if id := checkRow(&s, i, obs, act); id != slot {
				t.Fatalf("row %d holds transition %d, slot %d", i, id, slot)
			}
		}
	}

	u.st.reserve(20) // slots 40…59 reserved, never written
	for range 50 {
		if err := u.Sample(&s, 32, r); err != nil {
			t.Fatal(err)
		}
		for i, slot := range s.Index {
			if slot >= 40 || s.Gen[i] == 0 || checkRow(&s, i, obs, act) != slot {
				t.Fatalf("row %d: slot %d (generation %d) holds transition %d", i, slot, s.Gen[i], checkRow(&s, i, obs, act))
			}
		}
	}
}
