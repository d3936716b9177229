package offpolicy

import (
	"errors"
	"math/rand/v2"
	"testing"

	"herd/algo"
	"herd/internal/trainstate"
	"herd/nn"
)

// TestLearnerStateRoundTripAndRefusals: MarshalLearner's bytes restore
// every listed piece (parameters, optimizer moments, stream, counters)
// into a learner built alike, and bytes of another shape — cut, longer,
// or from a learner with other parameters — are refused, not loaded.
func TestLearnerStateRoundTripAndRefusals(t *testing.T) {
	build := func(width int) (LearnerState, *uint64, *algo.UpdateCounts, *float64) {
		p := nn.NewParam("w", width)
		opt, err := nn.NewAdam(nn.AdamConfig{LR: 0.1})
		if err != nil {
			t.Fatal(err)
		}
		var n uint64
		var c algo.UpdateCounts
		var f float64
		return LearnerState{Params: []*nn.Param{p}, Opts: []OptState{{Opt: opt, Params: []*nn.Param{p}}},
			Streams: []*rand.PCG{rand.NewPCG(1, 2)}, Values: []any{&n, &c, &f}}, &n, &c, &f
	}
	a, n, c, f := build(3)
	copy(a.Params[0].Value, []float32{1, 2, 3})
	copy(a.Params[0].Grad, []float32{0.5, -1, 2})
	a.Opts[0].Opt.Step(a.Params)
	a.Streams[0].Uint64()
	*n, *c, *f = 7, algo.UpdateCounts{Critic: 7, Actor: 3, Target: 1}, 0.25
	b, err := MarshalLearner(a)
	if err != nil {
		t.Fatal(err)
	}
	z, n2, c2, f2 := build(3)
	if err := UnmarshalLearner(z, b); err != nil {
		t.Fatal(err)
	}
	again, _ := MarshalLearner(z)
	if string(again) != string(b) || *n2 != 7 || *c2 != *c || *f2 != 0.25 || z.Streams[0].Uint64() != a.Streams[0].Uint64() {
		t.Fatal("the restored learner differs")
	}
	wide, _, _, _ := build(4)
	for name, bad := range map[string][]byte{"cut": b[:len(b)-3], "longer": append(b[:len(b):len(b)], 0), "empty": nil} {
		if err := UnmarshalLearner(z, bad); !errors.Is(err, trainstate.ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
	if err := UnmarshalLearner(wide, b); !errors.Is(err, trainstate.ErrCorrupt) {
		t.Errorf("other parameters: %v, want ErrCorrupt", err)
	}
}

// TestAssemblerStateMidEpisode: an assembler restored with steps pending
// (n = 3, two steps in) completes the same transitions as the original.
func TestAssemblerStateMidEpisode(t *testing.T) {
	mk := func() *Assembler {
		a, err := NewAssembler(2, 3, 0.9, 1, 1)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	a := mk()
	for i := range 2 {
		a.nstep[0].Push([]float32{float32(i)}, []float32{1}, float32(i), []float32{float32(i + 1)}, false, false)
	}
	st, err := a.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	b := mk()
	if err := b.UnmarshalBinary(st); err != nil {
		t.Fatal(err)
	}
	var ta, tb Transition
	a.nstep[0].Push([]float32{2}, []float32{1}, 5, []float32{3}, true, false)
	b.nstep[0].Push([]float32{2}, []float32{1}, 5, []float32{3}, true, false)
	for k := 0; ; k++ {
		okA, okB := a.nstep[0].Pop(&ta), b.nstep[0].Pop(&tb)
		if okA != okB || okA && (ta.Reward != tb.Reward || ta.Obs[0] != tb.Obs[0] || ta.Discount != tb.Discount || ta.Done != tb.Done) {
			t.Fatalf("transition %d: %+v vs %+v", k, ta, tb)
		}
		if !okA {
			if k != 3 {
				t.Fatalf("%d transitions, want 3", k)
			}
			break
		}
	}
	one, _ := NewAssembler(1, 3, 0.9, 1, 1)
	if err := one.UnmarshalBinary(st); !errors.Is(err, trainstate.ErrCorrupt) {
		t.Errorf("another number of envs: %v", err)
	}
	if err := b.UnmarshalBinary(st[:len(st)-1]); !errors.Is(err, trainstate.ErrCorrupt) {
		t.Errorf("cut: %v", err)
	}
}
