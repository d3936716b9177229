package probe_test

import (
	"slices"
	"testing"

	"herd/env"
	"herd/env/probe"
)

// TestBandit: every context pays 1 for its own action and 0 for any
// other, in one step, and Reset draws every context.
func TestBandit(t *testing.T) {
	e, err := env.Make("Probe/Bandit-v0")
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	seen := map[int]bool{}
	for i := range 200 {
		obs, _, err := e.Reset(int64(i))
		if err != nil {
			t.Fatal(err)
		}
		c := -1
		for j, v := range obs {
			if v == 1 {
				c = j
			}
		}
		seen[c] = true
		a := i % probe.Contexts
		_, r, term, trunc, _, err := e.Step([]float32{float32(a)})
		if err != nil || !term || trunc || r != map[bool]float64{true: 1, false: 0}[a == c] {
			t.Fatalf("context %d (obs %v), action %d: reward %v, terminated %v, truncated %v, %v", c, obs, a, r, term, trunc, err)
		}
		if _, _, _, _, _, err := e.Step([]float32{0}); err == nil {
			t.Fatal("a second step of one episode was accepted")
		}
	}
	if len(seen) != probe.Contexts || seen[-1] {
		t.Errorf("contexts drawn %v, want each of 0…%d", seen, probe.Contexts-1)
	}
}

// TestCorridor: only Cells − 1 forward moves (action k mod 2 in cell k)
// reach the goal and pay; a constant action goes back and forth between
// two cells; the registered id truncates at 15 steps.
func TestCorridor(t *testing.T) {
	e, err := env.Make("Probe/Corridor-v0")
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	// run follows a deterministic policy of the cell from cell 0.
	run := func(policy func(cell int) int) (ret float64, n int, term, trunc bool) {
		obs, _, err := e.Reset(1)
		if err != nil {
			t.Fatal(err)
		}
		for !term && !trunc {
			cell := slices.Index(obs, 1)
			var r float64
			obs, r, term, trunc, _, err = e.Step([]float32{float32(policy(cell))})
			if err != nil {
				t.Fatal(err)
			}
			if len(obs) != probe.Cells {
				t.Fatalf("observation %v", obs)
			}
			ret += r
			n++
		}
		return ret, n, term, trunc
	}
	if ret, n, term, _ := run(func(k int) int { return k % 2 }); ret != 1 || n != probe.Cells-1 || !term {
		t.Errorf("always forward: return %v in %d steps (terminated %v), want 1 in %d", ret, n, term, probe.Cells-1)
	}
	for a := range 2 {
		if ret, n, _, trunc := run(func(int) int { return a }); ret != 0 || n != 15 || !trunc {
			t.Errorf("always %d: return %v in %d steps (truncated %v), want 0 in 15", a, ret, n, trunc)
		}
	}
	// Back from the cell before the goal: back and forth below it.
	if ret, _, _, trunc := run(func(k int) int { return map[bool]int{true: 1 - k%2, false: k % 2}[k == probe.Cells-2] }); ret != 0 || !trunc {
		t.Errorf("one wrong move in a cycle: return %v, want 0 at the time limit", ret)
	}
}
