package flow

import (
	"errors"
	"slices"
	"testing"

	"herd/sample"
)

// TestConcatBatches: two workers' segments (envs 0–1 and 2) join into one
// segment of 3 envs whose row t·3+i is env i's step t, with the bootstrap
// rows in slot order and the episodes in (step, env) order — the segment
// the local executor would have filled; a recurrent policy's starting
// states join in slot order too, and a round whose segments disagree on
// the state width is refused.
func TestConcatBatches(t *testing.T) {
	const T = 2
	mk := func(n, base int, eps []sample.Episode) *sample.Segment {
		s := sample.NewSegment(T, n, 1, 1)
		for t := range T {
			for i := range n {
				k := t*n + i
				id := float32(100*t + base + i) // step t, env slot base+i
				s.Obs[k], s.Actions[k], s.LogProbs[k], s.Values[k], s.Rewards[k], s.Dones[k] = id, id, id, id, id, id
			}
		}
		for i := range n {
			s.NextObs[i], s.LastValues[i] = float32(base+i), float32(base+i)
			s.State = append(s.State, float32(base+i), -float32(base+i)) // 2 state values per env
		}
		s.Episodes, s.Version = eps, uint64(base+1)
		return s
	}
	a := mk(2, 0, []sample.Episode{{Return: 1, At: 1}})
	b := mk(1, 2, []sample.Episode{{Return: 2, At: 0}, {Return: 3, At: 1}})
	var got *sample.Segment
	for s, err := range ConcatBatches(FromSlice([][]*sample.Segment{{a, b}})) {
		if err != nil {
			t.Fatal(err)
		}
		got = s
	}
	want := []float32{0, 1, 2, 100, 101, 102}
	for name, x := range map[string][]float32{"obs": got.Obs, "actions": got.Actions, "logprobs": got.LogProbs,
		"values": got.Values, "rewards": got.Rewards, "dones": got.Dones} {
		if !slices.Equal(x, want) {
			t.Errorf("%s %v, want %v", name, x, want)
		}
	}
	if !slices.Equal(got.NextObs, []float32{0, 1, 2}) || !slices.Equal(got.LastValues, []float32{0, 1, 2}) {
		t.Errorf("bootstrap rows %v %v", got.NextObs, got.LastValues)
	}
	var rets []float64
	for _, e := range got.Episodes {
		rets = append(rets, e.Return)
	}
	if !slices.Equal(rets, []float64{2, 1, 3}) || got.Version != 1 || got.N != 3 {
		t.Errorf("episodes %v, version %d, N %d", rets, got.Version, got.N)
	}
	if !slices.Equal(got.State, []float32{0, 0, 1, -1, 2, -2}) {
		t.Errorf("states %v, want each env's 2 values in slot order", got.State)
	}
	if err := got.Check(); err != nil {
		t.Error(err)
	}
	b.State = b.State[:1]
	var err error
	for _, err = range ConcatBatches(FromSlice([][]*sample.Segment{{a, b}})) {
		break
	}
	if !errors.Is(err, sample.ErrShape) {
		t.Errorf("segments of 2 and 1 state values per env: %v, want sample.ErrShape", err)
	}
}
