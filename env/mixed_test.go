package env

import (
	"errors"
	"strings"
	"testing"
)

// TestMixedActionSpacesVector: toy/signal_v0's agents have different
// action spaces; with WithAgentActionSpaces the flat vector reports each
// row's own, a split part takes its rows' space and checks its actions
// against it, a part mixing both agents is refused, and the rewards are
// the game's (the listener's right guess earns +1, a pass 0).
func TestMixedActionSpacesVector(t *testing.T) {
	v, err := MakeVector("toy/signal_v0?targets=3&max_cycles=2", 4, Sync, WithAgentActionSpaces())
	if err != nil {
		t.Fatal(err)
	}
	f := v.(*FlatVector)
	if got := f.RowActionSpace(1).String(); got != "Discrete(4, start=0)" {
		t.Errorf("listener row space %s", got)
	}
	if _, err := SplitVector(v, [][]int{{0, 1}, {2, 3}}, nil); !errors.Is(err, ErrInvalidOption) || !strings.Contains(err.Error(), "different action spaces") {
		t.Errorf("a part of both agents: %v", err)
	}
	parts, err := SplitVector(v, [][]int{{0, 2}, {1, 3}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if parts[0].ActionSpace().String() != "Discrete(3, start=0)" || parts[1].ActionSpace().String() != "Discrete(4, start=0)" {
		t.Fatalf("part spaces %v and %v", parts[0].ActionSpace(), parts[1].ActionSpace())
	}
	type res struct {
		b   *Batch
		err error
	}
	step := func(p Vector, a []float32, out chan<- res) {
		b, err := p.Step(a)
		out <- res{b, err}
	}
	if _, err := parts[0].Step([]float32{3, 0}); !errors.Is(err, ErrInvalidAction) {
		t.Errorf("symbol 3 of Discrete(3): %v", err)
	}
	reset := make(chan error, 2)
	for _, p := range parts {
		go func() { _, err := p.Reset(7); reset <- err }()
	}
	for range 2 {
		if err := <-reset; err != nil {
			t.Fatal(err)
		}
	}
	// The speakers observe their targets; the listeners guess them (env
	// 0) or pass (env 1).
	targets := make([]float32, 2)
	b, err := f.Reset(7)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		row := b.ObsRow(2 * i)
		for k := range 3 {
			if row[k] == 1 {
				targets[i] = float32(k)
			}
		}
	}
	outs := make(chan res, 2)
	go step(parts[0], targets, outs)
	go step(parts[1], []float32{targets[0], 3}, outs)
	for range 2 {
		r := <-outs
		if r.err != nil {
			t.Fatal(r.err)
		}
		if r.b.Rewards[0] != 1 || r.b.Rewards[1] != 0 {
			t.Errorf("rewards %v, want 1 (right guess) and 0 (pass)", r.b.Rewards)
		}
	}
	for _, p := range parts {
		p.Close()
	}

	// One vector for both agents is refused, naming them.
	if _, err := MakeVector("toy/signal_v0", 2, Sync); !errors.Is(err, ErrInvalidOption) || !strings.Contains(err.Error(), "speaker_0 and listener_0") {
		t.Errorf("without WithAgentActionSpaces: %v", err)
	}
}

// TestActAs: act_as gives a turn env the action space of the agent
// named, takes every agent's own action, and refuses an unknown agent.
func TestActAs(t *testing.T) {
	e, err := Make("toy/signal_v0?continuous_listener=true&act_as=listener_0")
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if got := e.ActionSpace().String(); !strings.HasPrefix(got, "Box([-1]") {
		t.Errorf("act_as=listener_0: action space %s", got)
	}
	if _, _, err := e.Reset(1); err != nil {
		t.Fatal(err)
	}
	if _, _, _, _, _, err := e.Step([]float32{0.5}); !errors.Is(err, ErrInvalidAction) {
		t.Errorf("speaker's action 0.5: %v, want ErrInvalidAction", err)
	}
	if _, _, _, _, _, err := e.Step([]float32{2}); err != nil {
		t.Errorf("speaker's symbol 2: %v", err)
	}
	if _, _, _, _, _, err := e.Step([]float32{0.5}); err != nil {
		t.Errorf("listener's position 0.5: %v", err)
	}
	if _, err := Make("toy/signal_v0?act_as=nobody"); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("act_as=nobody: %v", err)
	}
}
