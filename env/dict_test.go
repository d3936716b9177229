package env

import (
	"errors"
	"slices"
	"testing"
)

// TestDictFlatten: a Dict orders its subspaces by key, whatever the order
// they were given in; its elements are their encodings concatenated in
// that order, and flattening is Gymnasium's flatten: Box values as they
// are, a Discrete value one-hot (from its start), a MultiDiscrete one-hot
// per dimension, nested Dicts in their own key order.
func TestDictFlatten(t *testing.T) {
	inner, err := NewDict(map[string]Space{"z": Discrete{N: 2}, "a": UniformBox(-1, 1, 2)})
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewDict(map[string]Space{
		"velocity": UniformBox(-5, 5, 1),
		"colour":   Discrete{N: 3, Start: 1},
		"nested":   inner,
		"keys":     MultiDiscrete{Nvec: []int{2, 3}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"colour", "keys", "nested", "velocity"}; !slices.Equal(d.Keys, want) {
		t.Fatalf("keys %v, want %v", d.Keys, want)
	}
	// colour 3 | keys [1 2] | nested {a: [0.5 −0.5], z: 1} | velocity 4
	x := []float32{3, 1, 2, 0.5, -0.5, 1, 4}
	if d.Dim() != len(x) || !d.Contains(x) {
		t.Fatalf("Dim %d, Contains %v", d.Dim(), d.Contains(x))
	}
	if d.Contains([]float32{4, 1, 2, 0.5, -0.5, 1, 4}) {
		t.Error("colour 4 is not in Discrete(3, start=1)")
	}
	want := []float32{
		0, 0, 1, // colour 3 of {1, 2, 3}
		0, 1, 0, 0, 1, // keys: 1 of 2, 2 of 3
		0.5, -0.5, 0, 1, // nested: a, then z one-hot
		4, // velocity
	}
	got := FlattenTo(nil, d, x)
	if !slices.Equal(got, want) {
		t.Errorf("flatten %v, want %v", got, want)
	}
	b, err := FlattenSpace(d)
	if err != nil {
		t.Fatal(err)
	}
	wantLow := []float32{0, 0, 0, 0, 0, 0, 0, 0, -1, -1, 0, 0, -5}
	if !slices.Equal(b.Low, wantLow) || b.Dim() != len(want) || b.High[12] != 5 || b.High[0] != 1 {
		t.Errorf("flat space %v", b)
	}
	if _, err := NewDict(nil); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("empty Dict: %v", err)
	}
}

// TestMakeFlattensDict: Make wraps an env observing a Dict in
// FlattenObservation (toy/GoalLine-v0: {goal, position}), DictSpaceOf
// finds the Dict; a FlatVector flattens each agent's Dict
// (toy/signal_v0?dict_obs=true) into its row.
func TestMakeFlattensDict(t *testing.T) {
	e, err := Make("toy/GoalLine-v0")
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if got := e.ObservationSpace().String(); got != "Box([0 0 -1], [1 1 1], [3])" {
		t.Errorf("observation space %s", got)
	}
	if d, ok := DictSpaceOf(e); !ok || d.String() != "Dict(goal: Discrete(2, start=0), position: Box([-1], [1], [1]))" {
		t.Errorf("DictSpaceOf: %v %v", d, ok)
	}
	obs, _, err := e.Reset(3)
	if err != nil {
		t.Fatal(err)
	}
	goal := slices.Index(obs[:2], 1)
	if goal < 0 || obs[0]+obs[1] != 1 || obs[2] != 0 {
		t.Fatalf("first observation %v: want a one-hot goal and position 0", obs)
	}
	move := float32(2 * goal) // towards the goal
	for i := range 4 {
		o, r, term, _, _, err := e.Step([]float32{move})
		if err != nil {
			t.Fatal(err)
		}
		if wantPos := float32(2*goal-1) * float32(i+1) / 4; o[2] != wantPos || term != (i == 3) || (i == 3) != (r == 1) {
			t.Errorf("step %d: %v reward %v terminated %v", i, o, r, term)
		}
	}

	v, err := MakeVector("toy/signal_v0?targets=3&dict_obs=true", 2, Sync, WithAgentActionSpaces())
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	// Rows: the listener's flattened {heard: Discrete(4), time: Box(1)}
	// is the widest (5 values); the speaker's {target: Discrete(3)} is
	// padded.
	if v.ObservationSpace().Dim() != 5 {
		t.Fatalf("row space %v", v.ObservationSpace())
	}
	b, err := v.Reset(1)
	if err != nil {
		t.Fatal(err)
	}
	speaker, listener := b.ObsRow(0), b.ObsRow(1)
	target := slices.Index(speaker[:3], 1)
	if target < 0 || speaker[3] != 0 || !slices.Equal(listener, []float32{0, 0, 0, 1, 0}) {
		t.Fatalf("rows %v and %v: want a one-hot target, and nothing heard at time 0", speaker, listener)
	}
	if b, err = v.Step([]float32{float32(target), 3}); err != nil {
		t.Fatal(err)
	}
	wantL := []float32{0, 0, 0, 0, 0.125} // step 1 of max_cycles 8
	wantL[target] = 1
	if !slices.Equal(b.ObsRow(1), wantL) {
		t.Errorf("listener row %v after hearing %d, want %v", b.ObsRow(1), target, wantL)
	}
}
