package transport

import "testing"

// TestSeenSamplesBound checks the learner's memory of ids: a long run of
// many workers, each restarted many times, leaves keepIncarnations
// entries per slot, and what it forgets is only incarnations older than
// the newest keepIncarnations.
func TestSeenSamplesBound(t *testing.T) {
	s := newSeenSamples()
	const slots, incs, seqs = 16, 20, 50
	for inc := uint64(1); inc <= incs; inc++ {
		for q := uint64(1); q <= seqs; q++ {
			for slot := range slots {
				id := SampleID{slot, inc, q}
				if s.seen(id) {
					t.Fatalf("%v taken for a repeat before it was queued", id)
				}
				s.add(id)
				if !s.seen(id) || !s.seen(SampleID{slot, inc, q - 1}) && q > 1 {
					t.Fatalf("%v or its predecessor not remembered", id)
				}
			}
		}
		if got, want := s.size(), slots*min(int(inc), keepIncarnations); got != want {
			t.Fatalf("after incarnation %d: %d entries, want %d", inc, got, want)
		}
	}
	for inc := uint64(incs - keepIncarnations + 1); inc <= incs; inc++ {
		if !s.seen(SampleID{0, inc, seqs}) {
			t.Errorf("incarnation %d forgotten", inc)
		}
	}
	if s.seen(SampleID{0, 1, 0}) || s.seen(SampleID{0, incs, seqs + 1}) {
		t.Error("seq 0 or a new number taken for a repeat")
	}
	// Slots beyond maxSlots replace others rather than grow the map.
	for slot := range maxSlots + 10 {
		s.add(SampleID{slot, 1, 1})
	}
	if n := len(s.slots); n > maxSlots {
		t.Errorf("%d slots remembered, bound %d", n, maxSlots)
	}
}

func TestParseSampleID(t *testing.T) {
	id := SampleID{7, 3, 12345}
	got, err := parseSampleID(id.String())
	if err != nil || got != id {
		t.Fatalf("round trip %v: %v %v", id, got, err)
	}
	for _, bad := range []string{"", "1", "1.2", "a.1.2", "1.2.x", "-1.2.3", "1.2.3.4"} {
		if _, err := parseSampleID(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
