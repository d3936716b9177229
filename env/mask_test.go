package env

import (
	"slices"
	"testing"
)

// maskedCountdown is countdown whose agents report action masks in their
// infos: agent k may not take action 2 when k + t is odd (t: steps taken
// in the episode, 0 after a reset).
type maskedCountdown struct{ *countdown }

func (c maskedCountdown) masks() map[string]Info {
	for k, a := range c.possible {
		c.infos[a] = Info{ActionMask: []bool{true, true, (k+c.t)%2 == 0}}
	}
	return c.infos
}

func (c maskedCountdown) Reset(seed int64) (map[string][]float32, map[string]Info, error) {
	obs, _, err := c.countdown.Reset(seed)
	return obs, c.masks(), err
}

func (c maskedCountdown) Step(act map[string][]float32) (map[string][]float32, map[string]float64, map[string]bool, map[string]bool, map[string]Info, error) {
	obs, rew, term, trunc, _, err := c.countdown.Step(act)
	return obs, rew, term, trunc, c.masks(), err
}

// TestFlatRowsCarryMasksAndInfos: with ActionMask the row's mask columns
// are the info's action_mask of the observation's step (the reset's
// after an autoreset), and the agents' infos reach the batch.
func TestFlatRowsCarryMasksAndInfos(t *testing.T) {
	pv, err := NewParallelVector(1, func(int) (Parallel, error) { return maskedCountdown{newCountdown(2)}, nil })
	if err != nil {
		t.Fatal(err)
	}
	f, err := NewFlatVector(pv, FlatOptions{AgentID: true, ActionMask: true})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if l := f.RowLayout(); l.Mask != 3 || l.Local() != 5 || l.Width() != 8 {
		t.Fatalf("layout %+v", l)
	}
	mask := func(b *Batch, r int) []float32 { return b.ObsRow(r)[5:8] }
	b, err := f.Reset(1)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(mask(b, 0), []float32{1, 1, 1}) || !slices.Equal(mask(b, 1), []float32{1, 1, 0}) {
		t.Fatalf("reset masks %v %v", mask(b, 0), mask(b, 1))
	}
	if !slices.Equal(b.Infos[1].ActionMask, []bool{true, true, false}) {
		t.Fatalf("reset info %+v", b.Infos[1])
	}
	if b, err = f.Step([]float32{0, 0}); err != nil { // t = 1: a0 leaves
		t.Fatal(err)
	}
	if !slices.Equal(mask(b, 1), []float32{1, 1, 1}) || !slices.Equal(b.Infos[1].ActionMask, []bool{true, true, true}) {
		t.Fatalf("step 1: a1's mask %v, info %+v", mask(b, 1), b.Infos[1])
	}
	if b, err = f.Step([]float32{0, 0}); err != nil { // t = 2: a1 leaves, autoreset to t = 0
		t.Fatal(err)
	}
	if !slices.Equal(mask(b, 1), []float32{1, 1, 0}) || !slices.Equal(mask(b, 0), []float32{1, 1, 1}) {
		t.Fatalf("after the autoreset: masks %v %v, want the reset's", mask(b, 0), mask(b, 1))
	}
	if _, err := NewFlatVector(pv, FlatOptions{ActionMask: true}); err != nil {
		t.Fatal(err)
	}
	box, err := NewParallelVector(1, func(int) (Parallel, error) { return MakeParallel("mpe/simple_spread_v3?continuous_actions=true") })
	if err != nil {
		t.Fatal(err)
	}
	defer box.Close()
	if _, err := NewFlatVector(box, FlatOptions{ActionMask: true}); err == nil {
		t.Fatal("an action mask for Box actions was accepted")
	}
}
