package env_test

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"herd/env"
	"herd/internal/rng"
)

func testRand(name string) *rand.Rand { return rng.New(1, "test/"+name, 0) }

// TestTimeLimitKeepsTerminated: when the last allowed step also
// terminates, both flags are set (Gymnasium's TimeLimit).
func TestTimeLimitKeepsTerminated(t *testing.T) {
	e, err := env.Make("CartPole-v1", env.WithMaxEpisodeSteps(3))
	if err != nil {
		t.Fatal(err)
	}
	e.Reset(0)
	e.Step([]float32{0})
	e.Step([]float32{0})
	env.Unwrapped(e).(env.Stater).SetState([]float64{2.39, 1, 0, 0}) // x′ > 2.4
	_, _, term, trunc, _, err := e.Step([]float32{1})
	if err != nil || !term || !trunc {
		t.Fatalf("last step crossing x = 2.4: terminated %v truncated %v err %v, want both true", term, trunc, err)
	}
	tl := e.(*env.TimeLimit)
	if tl.Elapsed() != 3 || tl.MaxSteps() != 3 {
		t.Fatalf("elapsed %d max %d", tl.Elapsed(), tl.MaxSteps())
	}
	e.Reset(env.NoSeed)
	if tl.Elapsed() != 0 {
		t.Fatal("Reset did not clear the step count")
	}
	if _, err := env.NewTimeLimit(e, 0); !errors.Is(err, env.ErrInvalidOption) {
		t.Fatalf("NewTimeLimit(0): %v", err)
	}
}

func TestRecordEpisodeStatistics(t *testing.T) {
	e, _ := env.Make("MountainCarContinuous-v0", env.WithEpisodeStatistics(), env.WithMaxEpisodeSteps(50))
	r := testRand("stats")
	for ep := 0; ep < 3; ep++ {
		e.Reset(int64(ep))
		sum, n := 0.0, 0
		for {
			a := []float32{float32(r.Float64()*4 - 2)}
			_, rew, term, trunc, info, err := e.Step(a)
			if err != nil {
				t.Fatal(err)
			}
			sum += rew
			n++
			if info.HasEpisode != (term || trunc) {
				t.Fatalf("HasEpisode %v on a step with terminated %v truncated %v", info.HasEpisode, term, trunc)
			}
			if term || trunc {
				if info.Episode.Length != n || math.Abs(info.Episode.Return-sum) > 1e-12 {
					t.Fatalf("episode stats %+v, want return %v length %d", info.Episode, sum, n)
				}
				break
			}
		}
	}
}

func TestClipAndStrictActions(t *testing.T) {
	stateAfter := func(e env.Env, a float32) ([]float64, error) {
		e.Reset(0)
		env.Unwrapped(e).(env.Stater).SetState([]float64{0.5, 0})
		if _, _, _, _, _, err := e.Step([]float32{a}); err != nil {
			return nil, err
		}
		return env.Unwrapped(e).(env.Stater).StateTo(nil), nil
	}
	base, _ := env.Make("Pendulum-v1")
	clip, err := env.NewClipAction(base)
	if err != nil {
		t.Fatal(err)
	}
	s5, _ := stateAfter(clip, 5)
	s2, _ := stateAfter(clip, 2)
	if s5[1] != s2[1] {
		t.Fatalf("ClipAction: action 5 gives %v, action 2 gives %v", s5, s2)
	}
	if b := clip.ActionSpace().(env.Box); !math.IsInf(float64(b.High[0]), 1) {
		t.Fatalf("ClipAction action space %v, want unbounded", b)
	}
	strict, _ := env.Make("Pendulum-v1", env.WithStrictActions())
	if _, err := stateAfter(strict, 2.5); !errors.Is(err, env.ErrInvalidAction) {
		t.Fatalf("strict 2.5: %v, want ErrInvalidAction", err)
	}
	if _, err := stateAfter(strict, 1.5); err != nil {
		t.Fatal(err)
	}
	cp, _ := env.Make("CartPole-v1")
	if _, err := env.NewClipAction(cp); !errors.Is(err, env.ErrInvalidOption) {
		t.Fatalf("ClipAction on Discrete: %v", err)
	}
}

// naiveStats is the two-pass mean and population variance of xs, blended
// with Gymnasium's prior (mean 0, var 1, count 1e-4).
func naiveStats(xs []float64) (mean, variance float64) {
	const c0 = 1e-4
	n := float64(len(xs))
	m := 0.0
	for _, x := range xs {
		m += x
	}
	m /= n
	v := 0.0
	for _, x := range xs {
		v += (x - m) * (x - m)
	}
	v /= n
	tot := c0 + n
	mean = m * n / tot
	variance = (1*c0 + v*n + m*m*c0*n/tot) / tot
	return mean, variance
}

func TestNormalizeObservation(t *testing.T) {
	e, _ := env.Make("MountainCar-v0")
	n, err := env.NewNormalizeObservation(e, 0)
	if err != nil {
		t.Fatal(err)
	}
	r := testRand("normobs")
	var raw [2][]float64
	record := func(obs []float32) {
		s := env.Unwrapped(n).(env.Stater).StateTo(nil)
		raw[0] = append(raw[0], float64(float32(s[0])))
		raw[1] = append(raw[1], float64(float32(s[1])))
		for i := 0; i < 2; i++ {
			m, v := naiveStats(raw[i])
			want := (raw[i][len(raw[i])-1] - m) / math.Sqrt(v+1e-8)
			if math.Abs(float64(obs[i])-want) > 1e-4*math.Max(1, math.Abs(want)) {
				t.Fatalf("normalised obs[%d] = %v, naive %v", i, obs[i], want)
			}
		}
	}
	obs, _, _ := n.Reset(1)
	record(obs)
	for i := 0; i < 300; i++ {
		obs, _, term, trunc, _, err := n.Step([]float32{float32(r.IntN(3))})
		if err != nil {
			t.Fatal(err)
		}
		record(obs)
		if term || trunc {
			obs, _, _ = n.Reset(env.NoSeed)
			record(obs)
		}
	}
	// Save, restore into a fresh wrapper, and get the same outputs.
	blob, err := json.Marshal(n.Stats())
	if err != nil {
		t.Fatal(err)
	}
	var restored env.RunningMeanStd
	json.Unmarshal(blob, &restored)
	e2, _ := env.Make("MountainCar-v0")
	n2, _ := env.NewNormalizeObservation(e2, 0)
	if err := n2.SetStats(restored); err != nil {
		t.Fatal(err)
	}
	n.SetUpdate(false)
	n2.SetUpdate(false)
	a, _, _ := n.Reset(99)
	b, _, _ := n2.Reset(99)
	if a[0] != b[0] || a[1] != b[1] {
		t.Fatalf("restored stats give %v, original %v", b, a)
	}
	if err := n2.SetStats(env.RunningMeanStd{Mean: []float64{0}, Var: []float64{1}, Count: 1}); !errors.Is(err, env.ErrInvalidOption) {
		t.Fatalf("SetStats of wrong size: %v", err)
	}
}

func TestNormalizeReward(t *testing.T) {
	e, _ := env.Make("Pendulum-v1")
	n, err := env.NewNormalizeReward(e, 0.9, 0)
	if err != nil {
		t.Fatal(err)
	}
	n.Reset(2)
	g := 0.0
	var returns []float64
	r := testRand("normrew")
	for i := 0; i < 150; i++ {
		// The raw reward is what the unwrapped env would return: recompute
		// it from the scaled one and the statistics after the update.
		_, scaled, _, _, _, err := n.Step([]float32{float32(r.Float64()*4 - 2)})
		if err != nil {
			t.Fatal(err)
		}
		st := n.Stats()
		raw := scaled * math.Sqrt(st.Var[0]+1e-8)
		g = g*0.9 + raw
		returns = append(returns, g)
		m, v := naiveStats(returns)
		if math.Abs(st.Mean[0]-m) > 1e-9*math.Max(1, math.Abs(m)) || math.Abs(st.Var[0]-v) > 1e-9*math.Max(1, v) {
			t.Fatalf("step %d: return stats %v %v, naive %v %v", i, st.Mean[0], st.Var[0], m, v)
		}
		if raw > 0 || raw < -16.3 {
			t.Fatalf("recovered raw reward %v outside Pendulum's range", raw)
		}
	}
	if n.Return() != g && math.Abs(n.Return()-g) > 1e-9 {
		t.Fatalf("Return() %v, want %v", n.Return(), g)
	}
	if _, err := env.NewNormalizeReward(e, 1.5, 0); !errors.Is(err, env.ErrInvalidOption) {
		t.Fatalf("gamma 1.5: %v", err)
	}
}

func TestSpaces(t *testing.T) {
	r := testRand("spaces")
	d := env.Discrete{N: 3, Start: -1}
	for i := 0; i < 100; i++ {
		if s := d.SampleTo(nil, r); !d.Contains(s) {
			t.Fatalf("Discrete sample %v not contained", s)
		}
	}
	for _, bad := range [][]float32{{2}, {-2}, {0.5}, {}, {0, 0}} {
		if d.Contains(bad) {
			t.Fatalf("%v contains %v", d, bad)
		}
	}
	inf := float32(math.Inf(1))
	b, err := env.NewBox([]float32{-1, 0, -inf, -inf}, []float32{1, inf, 0, inf}, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		if s := b.SampleTo(nil, r); !b.Contains(s) {
			t.Fatalf("Box sample %v not in %v", s, b)
		}
	}
	if _, err := env.NewBox([]float32{1}, []float32{0}); !errors.Is(err, env.ErrInvalidOption) {
		t.Fatalf("low > high: %v", err)
	}
	if _, err := env.NewBox([]float32{0, 0}, []float32{1, 1}, 3); !errors.Is(err, env.ErrInvalidOption) {
		t.Fatalf("shape mismatch: %v", err)
	}
	m := env.MultiDiscrete{Nvec: []int{2, 5}}
	if !m.Contains([]float32{1, 4}) || m.Contains([]float32{2, 0}) || m.Contains([]float32{1}) {
		t.Fatal("MultiDiscrete.Contains")
	}
	if err := env.CheckAction(m, []float32{1, 5}); !errors.Is(err, env.ErrInvalidAction) {
		t.Fatalf("MultiDiscrete out of range: %v", err)
	}
}

// TestNormalizeRewardTermination: the discounted return restarts after a
// terminated step (G ← γ·G·(1 − terminated) + r) but, as in Gymnasium, not
// after a truncated one or a Reset.
func TestNormalizeRewardTermination(t *testing.T) {
	e, _ := env.Make("CartPole-v1", env.WithMaxEpisodeSteps(5))
	n, _ := env.NewNormalizeReward(e, 0.5, 0)
	n.Reset(0)
	g := 0.0
	for i := 0; i < 5; i++ { // truncated at step 5, never terminated (alternating pushes)
		_, _, term, trunc, _, err := n.Step([]float32{float32(i % 2)})
		if err != nil || term {
			t.Fatalf("step %d: terminated %v err %v", i, term, err)
		}
		g = g*0.5 + 1
		if math.Abs(n.Return()-g) > 1e-12 {
			t.Fatalf("step %d: G = %v, want %v", i, n.Return(), g)
		}
		if i == 4 && !trunc {
			t.Fatal("not truncated at the limit")
		}
	}
	n.Reset(env.NoSeed)
	if n.Return() != g {
		t.Fatalf("Reset changed G from %v to %v", g, n.Return())
	}
	env.Unwrapped(n).(env.Stater).SetState([]float64{2.39, 1, 0, 0})
	if _, _, term, _, _, _ := n.Step([]float32{1}); !term || n.Return() != 1 {
		t.Fatalf("terminating step: terminated %v, G = %v, want true and G = r = 1", term, n.Return())
	}
}
