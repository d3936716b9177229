package rng

import "testing"

func TestSameIdentitySameStream(t *testing.T) {
	a, b := New(7, "actor", 2), New(7, "actor", 2)
	for i := 0; i < 100; i++ {
		if x, y := a.Uint64(), b.Uint64(); x != y {
			t.Fatalf("draw %d: %d != %d", i, x, y)
		}
	}
}

func TestDifferentIdentitiesDiffer(t *testing.T) {
	ids := []struct {
		seed uint64
		role string
		slot int
	}{{7, "actor", 2}, {7, "actor", 3}, {7, "learner", 2}, {8, "actor", 2}, {7, "", 0}}
	seen := map[uint64]int{}
	for i, id := range ids {
		v := New(id.seed, id.role, id.slot).Uint64()
		if j, ok := seen[v]; ok {
			t.Fatalf("identities %d and %d give the same first draw", i, j)
		}
		seen[v] = i
	}
}

func TestDeriveIsStable(t *testing.T) {
	if Derive(1, "env", 0) != Derive(1, "env", 0) || Derive(1, "env", 0) == Derive(1, "env", 1) {
		t.Fatal("Derive must be a pure function of its identity")
	}
}
