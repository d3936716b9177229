package offpolicy

import (
	"strings"
	"testing"

	"herd/algo"
	"herd/env"
	"herd/internal/rng"
	"herd/rollout"
	"herd/sample"
	"herd/weights"
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
	if err := CheckEnv(env.Maker{}, "Pendulum-v1"); err != nil {
		t.Errorf("Pendulum-v1: %v", err)
	}
	if err := CheckEnv(env.Maker{}, ""); err != nil {
		t.Errorf("empty id: %v", err)
	}
	if err := CheckEnv(env.Maker{}, "CartPole-v1"); err == nil || !strings.Contains(err.Error(), "Box") {
		t.Errorf("CartPole-v1: %v, want a Box error", err)
	}
	if err := CheckEnv(env.Maker{}, "NoSuchEnv-v0"); err == nil {
		t.Error("unknown env accepted")
	}
}

// TestEnvWorkerStepsAndAssembles: each Step adds N to the step count,
// hands the next observations over, and leaves one one-step transition per
// env whose rows match what the envs did.
func TestEnvWorkerStepsAndAssembles(t *testing.T) {
	envs, err := MakeEnvs(env.Maker{}, "Pendulum-v1", 2)
	if err != nil {
		t.Fatal(err)
	}
	defer envs.Close()
	ap, err := NewActorPieces(algo.Header{Env: "Pendulum-v1", Seed: 1}, algo.SpacesOf(envs))
	if err != nil {
		t.Fatal(err)
	}
	ap.LearningStarts, ap.Gamma, ap.Sigma = 1000, 0.99, 0.1
	s, _ := ap.Sampler(2, rng.New(1, "test", 0))
	a, _ := ap.Assembler(2)
	w, err := NewEnvWorker(envs, zeroPolicy{out: 1}, s, a)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Reset(1); err != nil {
		t.Fatal(err)
	}
	prevObs := append([]float32(nil), w.Loop.Obs...)
	var total int
	for range 3 {
		if err := w.Step(algo.Discard()); err != nil {
			t.Fatal(err)
		}
		tr := &w.Transitions
		if tr.N != 2 || tr.ObsDim != 3 || tr.ActDim != 1 {
			t.Fatalf("step made %d transitions of %d, %d; want 2 of 3, 1", tr.N, tr.ObsDim, tr.ActDim)
		}
		for i := range 2 {
			if tr.Actions[i] != w.Loop.Acts.EnvActions[i] || tr.Rewards[i] != w.Loop.Batch.Rewards[i] || tr.Discounts[i] != 0.99 {
				t.Errorf("row %d: action %v reward %v discount %v; want %v %v 0.99",
					i, tr.Actions[i], tr.Rewards[i], tr.Discounts[i], w.Loop.Acts.EnvActions[i], w.Loop.Batch.Rewards[i])
			}
			for j := range 3 {
				if tr.Obs[i*3+j] != prevObs[i*3+j] || tr.NextObs[i*3+j] != w.Loop.Batch.Obs[i*3+j] {
					t.Fatalf("row %d: obs %v → %v, want %v → %v", i, tr.Obs[i*3:i*3+3], tr.NextObs[i*3:i*3+3],
						prevObs[i*3:i*3+3], w.Loop.Batch.Obs[i*3:i*3+3])
				}
			}
		}
		total += tr.N
		copy(prevObs, w.Loop.Obs)
	}
	if w.Steps != 6 || total != 6 {
		t.Errorf("after 3 steps of 2 envs: Steps %d, transitions %d; want 6 and 6", w.Steps, total)
	}
	if _, err := NewActorPieces(algo.Header{Env: "CartPole-v1"}, algo.Spaces{Obs: envs.ObservationSpace(), Act: env.Discrete{N: 2}}); err == nil {
		t.Error("a Discrete action space made actor pieces")
	}
}

// zeroPolicy outputs zeros.
type zeroPolicy struct{ out int }

func (p zeroPolicy) OutDim() int                     { return p.out }
func (zeroPolicy) SetWeights(*weights.Version) error { return nil }
func (zeroPolicy) Version() uint64                   { return 0 }
func (p zeroPolicy) ForwardTo(dst, _ []float32, n int) []float32 {
	clear(dst[:n*p.out])
	return dst[:n*p.out]
}

// TestAssemblerEnvOrderAndEpisodes: rows come out env by env, and an
// episode that ends is reported with the row count at which it ended.
func TestAssemblerEnvOrderAndEpisodes(t *testing.T) {
	a, err := NewAssembler(2, 2, 0.5, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	b := &env.Batch{ObsDim: 1, Obs: []float32{10, 20}, Rewards: []float32{1, 2}, Terminated: []bool{false, true},
		Truncated: []bool{false, false}, Infos: make([]env.Info, 2), FinalObs: []float32{0, 21}}
	b.Infos[1].HasEpisode, b.Infos[1].Episode.Return, b.Infos[1].Episode.Length = true, 2, 1
	var tr sample.Transitions
	if err := a.Add(&tr, []float32{1, 2}, []float32{0, 1}, b); err != nil {
		t.Fatal(err)
	}
	// Env 0 needs a second step; env 1 terminated: one row, no bootstrap.
	if tr.N != 1 || tr.Obs[0] != 2 || tr.NextObs[0] != 21 || tr.Dones[0] != 1 || tr.Discounts[0] != 0.5 {
		t.Fatalf("after step 1: %+v", tr)
	}
	if len(tr.Episodes) != 1 || tr.Episodes[0].Return != 2 || tr.Episodes[0].At != 1 {
		t.Errorf("episodes %+v, want one of return 2 at row 1", tr.Episodes)
	}
	b.Terminated[1] = false
	b.Infos[1].HasEpisode = false
	if err := a.Add(&tr, []float32{10, 20}, []float32{0, 1}, b); err != nil {
		t.Fatal(err)
	}
	if tr.N != 2 || tr.Obs[1] != 1 || tr.Rewards[1] != 1+0.5*1 || tr.Discounts[1] != 0.25 || tr.NextObs[1] != 10 {
		t.Errorf("env 0's 2-step transition: obs %v reward %v discount %v next %v", tr.Obs, tr.Rewards, tr.Discounts, tr.NextObs)
	}
	rollout.ClearTransitions(&tr)
	if tr.N != 0 || len(tr.Obs) != 0 || len(tr.Episodes) != 0 {
		t.Errorf("ClearTransitions left %+v", tr)
	}
	if err := a.Add(&tr, []float32{1}, []float32{0}, b); err == nil {
		t.Error("a 2-env batch with 1 observation accepted")
	}
}

func TestCrossings(t *testing.T) {
	cases := []struct{ prev, cur, every, want int64 }{
		{9, 10, 10, 1}, {10, 11, 10, 0}, {0, 16, 4, 4}, {3, 25, 10, 2}, {1, 2, 0, 0}, {5, 5, 1, 0}, {0, 16, 1, 16}}
	for _, c := range cases {
		if got := Crossings(c.prev, c.cur, c.every); got != c.want {
			t.Errorf("Crossings(%d, %d, %d) = %d, want %d", c.prev, c.cur, c.every, got, c.want)
		}
	}
}
