package scratch

import "testing"

// TestResize: within the capacity the backing array and its contents stay;
// beyond it a new zeroed slice of the length asked for.
func TestResize(t *testing.T) {
	s := make([]float32, 2, 4)
	s[0] = 7
	if r := Resize(s, 3); len(r) != 3 || &r[0] != &s[0] || r[0] != 7 {
		t.Errorf("Resize within capacity: %v (len %d), want s's array", r, len(r))
	}
	if r := Resize(s, 1); len(r) != 1 || &r[0] != &s[0] {
		t.Errorf("Resize shorter: %v, want s's array", r)
	}
	r := Resize(s, 5)
	if len(r) != 5 || &r[0] == &s[0] {
		t.Fatalf("Resize beyond capacity: len %d, same array %v", len(r), &r[0] == &s[0])
	}
	for i, v := range r {
		if v != 0 {
			t.Errorf("Resize beyond capacity: r[%d] = %v, want 0", i, v)
		}
	}
}
