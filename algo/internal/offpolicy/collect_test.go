package offpolicy

import (
	"strings"
	"testing"

	"herd/algo"
	"herd/internal/rng"
)

// TestAddGaussianNoise: each value moves by ε·scale with ε ~ N(0, σ²) drawn
// in row-major order, then is clipped to its coordinate's bounds.
func TestAddGaussianNoise(t *testing.T) {
	scale, low, high := []float32{1, 10}, []float32{-1, -5}, []float32{1, 5}
	actions := []float32{0, 0, 0.9, 4.9}
	AddGaussianNoise(actions, scale, low, high, 0.5, rng.New(1, "test", 0))
	r := rng.New(1, "test", 0)
	for i, a0 := range []float32{0, 0, 0.9, 4.9} {
		j := i % 2
		want := max(low[j], min(high[j], a0+float32(r.NormFloat64()*0.5)*scale[j]))
		if actions[i] != want {
			t.Errorf("actions[%d] = %v, want %v", i, actions[i], want)
		}
		if actions[i] < low[j] || actions[i] > high[j] {
			t.Errorf("actions[%d] = %v outside [%v, %v]", i, actions[i], low[j], high[j])
		}
	}
	same := []float32{0, 0, 0.9, 4.9}
	AddGaussianNoise(same, scale, low, high, 0, rng.New(1, "test", 0))
	if same[0] != 0 || same[3] != 4.9 {
		t.Errorf("σ = 0 moved the actions: %v", same)
	}
}

// TestAddOUNoise: the perturbation is the OU state times the scale, and
// the stream advances as OU.Sample plus one normal per value.
func TestAddOUNoise(t *testing.T) {
	scale, low, high := []float32{2}, []float32{-2}, []float32{2}
	ou := NewOU(3, 0.5)
	actions := make([]float32, 3)
	r := rng.New(2, "test", 0)
	AddOUNoise(actions, scale, low, high, ou, r)
	ref := NewOU(3, 0.5)
	rr := rng.New(2, "test", 0)
	ref.Sample(rr)
	for i := range actions {
		rr.NormFloat64()
		if want := max(-2, min(2, float32(ref.X[i])*2)); actions[i] != want || ou.X[i] != ref.X[i] {
			t.Errorf("actions[%d] = %v (x %v), want %v (x %v)", i, actions[i], ou.X[i], want, ref.X[i])
		}
	}
	if r.Uint64() != rr.Uint64() {
		t.Error("AddOUNoise consumed a different number of draws")
	}
}

// TestCommonCheck reports every bad shared setting and nothing for good
// ones.
func TestCommonCheck(t *testing.T) {
	var got []string
	bad := func(format string, a ...any) { got = append(got, format) }
	Common{NumEnvs: 1, BatchSize: 8, BufferSize: 8, Gamma: 0.99, Tau: 0.005, NetArch: []int{4}}.Check(bad)
	if len(got) != 0 {
		t.Fatalf("good settings rejected: %v", got)
	}
	Common{BatchSize: 8, BufferSize: 4, Gamma: 2, Tau: 0, LearningStarts: -1, NetArch: []int{0}}.Check(bad)
	all := strings.Join(got, "\n")
	for _, want := range []string{"num_envs", "buffer_size", "gamma", "tau", "learning_starts", "net_arch"} {
		if !strings.Contains(all, want) {
			t.Errorf("Check does not report %s:\n%s", want, all)
		}
	}
}

// TestCheckEnv: a Box env passes; a Discrete one and an unknown one do not;
// an empty id is not checked.
func TestCheckEnv(t *testing.T) {
	if err := CheckEnv("Pendulum-v1"); err != nil {
		t.Errorf("Pendulum-v1: %v", err)
	}
	if err := CheckEnv(""); err != nil {
		t.Errorf("empty id: %v", err)
	}
	if err := CheckEnv("CartPole-v1"); err == nil || !strings.Contains(err.Error(), "Box") {
		t.Errorf("CartPole-v1: %v, want a Box error", err)
	}
	if err := CheckEnv("NoSuchEnv-v0"); err == nil {
		t.Error("unknown env accepted")
	}
}

// TestCollectorStoresAndCounts: each Step adds N transitions to replay and
// N to the step count, and hands the next observations over.
func TestCollectorStoresAndCounts(t *testing.T) {
	c, err := NewCollector("Pendulum-v1", 2, 100, 0.99)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Reset(1); err != nil {
		t.Fatal(err)
	}
	r := rng.New(1, "test", 0)
	for range 3 {
		c.RandomActions(r)
		if err := c.Step(algo.Discard()); err != nil {
			t.Fatal(err)
		}
		for i, v := range c.Batch.Obs {
			if c.Obs[i] != v {
				t.Fatalf("Obs[%d] = %v, want the batch's %v", i, c.Obs[i], v)
			}
		}
	}
	if c.Steps != 6 || c.Replay.Len() != 6 {
		t.Errorf("after 3 steps of 2 envs: Steps %d, replay %d; want 6 and 6", c.Steps, c.Replay.Len())
	}
	if _, err := NewCollector("CartPole-v1", 1, 100, 0.99); err == nil {
		t.Error("a Discrete env made a collector")
	}
}
