package box2d

import (
	"errors"
	"math"
	"testing"

	"herd/env/internal/core"
)

// runHeuristic plays one episode of at most maxSteps steps with Heuristic
// and returns its return and length.
func runHeuristic(t testing.TB, l *LunarLander, seed int64, maxSteps int) (float64, int, bool) {
	obs, _, err := l.Reset(seed)
	if err != nil {
		t.Fatal(err)
	}
	var a []float32
	total := 0.0
	for n := 1; ; n++ {
		a = Heuristic(a, obs, l.cfg.Continuous)
		var r float64
		var term bool
		obs, r, term, _, _, err = l.Step(a)
		if err != nil {
			t.Fatal(err)
		}
		total += r
		if term || n == maxSteps {
			return total, n, term
		}
	}
}

func meanHeuristicReturn(t testing.TB, cfg LunarLanderConfig, episodes int) float64 {
	l, err := NewLunarLander(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for ep := 0; ep < episodes; ep++ {
		ret, _, _ := runHeuristic(t, l, int64(ep), 1000)
		sum += ret
	}
	return sum / float64(episodes)
}

func TestHeuristicSmoke(t *testing.T) {
	episodes := 10
	if raceEnabled {
		episodes = 3 // -race: exercise the code paths, not the statistics
	}
	for _, cont := range []bool{false, true} {
		cfg := DefaultLunarLanderConfig()
		cfg.Continuous = cont
		m := meanHeuristicReturn(t, cfg, episodes)
		t.Logf("continuous=%v: mean heuristic return over %d episodes %.1f", cont, episodes, m)
		if !raceEnabled && m < 150 {
			t.Errorf("continuous=%v: mean heuristic return %.1f over 10 episodes, want ≥ 150", cont, m)
		}
		if math.IsNaN(m) || m < -1000 || m > 1000 {
			t.Errorf("continuous=%v: mean return %v is not a LunarLander return", cont, m)
		}
	}
}

func TestHeuristic100(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("100 episodes: skipped with -short and -race (TestHeuristicSmoke runs 10)")
	}
	for _, cont := range []bool{false, true} {
		cfg := DefaultLunarLanderConfig()
		cfg.Continuous = cont
		m := meanHeuristicReturn(t, cfg, 100)
		t.Logf("continuous=%v: mean heuristic return over 100 episodes %.1f", cont, m)
		if m < 200 {
			t.Errorf("continuous=%v: mean %.1f, want ≥ 200", cont, m)
		}
	}
}

// TestLanderOutcomes checks the three ways an episode ends: a soft landing
// puts the lander to sleep (+100), doing nothing crashes it (−100), and
// firing one side engine throws it out of the viewport (|x| ≥ 1, −100).
func TestLanderOutcomes(t *testing.T) {
	l, _ := NewLunarLander(DefaultLunarLanderConfig())
	landed := 0
	for ep := 0; ep < 10; ep++ {
		ret, n, term := runHeuristic(t, l, int64(ep), 1000)
		if term && l.lastReward == 100 {
			landed++
		}
		t.Logf("heuristic episode %d: return %.1f in %d steps, terminated %v, last reward %v", ep, ret, n, term, l.lastReward)
	}
	if landed < 5 {
		t.Fatalf("heuristic came to rest in %d of 10 episodes", landed)
	}
	for _, policy := range []struct {
		name string
		a    []float32
	}{{"no-op", []float32{0}}, {"left engine", []float32{1}}} {
		crashes := 0
		for ep := 0; ep < 5; ep++ {
			l.Reset(int64(ep))
			for n := 0; n < 1000; n++ {
				obs, r, term, _, _, err := l.Step(policy.a)
				if err != nil {
					t.Fatal(err)
				}
				if term {
					if r == -100 && (l.gameOver || math.Abs(float64(obs[0])) >= 1) {
						crashes++
					}
					break
				}
			}
		}
		if crashes != 5 {
			t.Fatalf("%s policy: %d of 5 episodes ended with −100", policy.name, crashes)
		}
	}
}

func TestLanderReproducibleAndWind(t *testing.T) {
	traj := func(cfg LunarLanderConfig, seed int64) []float32 {
		l, err := NewLunarLander(cfg)
		if err != nil {
			t.Fatal(err)
		}
		obs, _, _ := l.Reset(seed)
		out := append([]float32(nil), obs...)
		var a []float32
		for n := 0; n < 100; n++ {
			a = Heuristic(a, obs, cfg.Continuous)
			var term bool
			obs, _, term, _, _, _ = l.Step(a)
			out = append(out, obs...)
			if term {
				break
			}
		}
		return out
	}
	cfg := DefaultLunarLanderConfig()
	a, b, c := traj(cfg, 5), traj(cfg, 5), traj(cfg, 6)
	if !equal32(a, b) || equal32(a, c) {
		t.Fatal("same seed must repeat the trajectory and another seed must not")
	}
	windy := cfg
	windy.EnableWind = true
	w1, w2 := traj(windy, 5), traj(windy, 5)
	if !equal32(w1, w2) {
		t.Fatal("windy trajectory not reproducible")
	}
	if equal32(w1, a) {
		t.Fatal("wind had no effect")
	}
	windy.WindPower, windy.TurbulencePower = 0, 0
	// Zero wind power still draws the wind phases (changing later draws), so
	// compare only that it runs; the first observation is the same.
	if z := traj(windy, 5); !equal32(z[:8], a[:8]) {
		t.Fatalf("zero-power wind changed the reset observation: %v vs %v", z[:8], a[:8])
	}
}

func TestLanderErrors(t *testing.T) {
	bad := DefaultLunarLanderConfig()
	bad.Gravity = -13
	if _, err := NewLunarLander(bad); !errors.Is(err, core.ErrInvalidOption) {
		t.Fatalf("gravity −13: %v", err)
	}
	l, _ := NewLunarLander(DefaultLunarLanderConfig())
	if _, _, _, _, _, err := l.Step([]float32{0}); !errors.Is(err, core.ErrNeedsReset) {
		t.Fatalf("Step before Reset: %v", err)
	}
	l.Reset(0)
	for _, a := range [][]float32{{4}, {-1}, {1.5}, {0, 0}, {}} {
		if _, _, _, _, _, err := l.Step(a); !errors.Is(err, core.ErrInvalidAction) {
			t.Fatalf("discrete action %v: %v", a, err)
		}
	}
	cont := DefaultLunarLanderConfig()
	cont.Continuous = true
	lc, _ := NewLunarLander(cont)
	lc.Reset(0)
	for _, a := range [][]float32{{0}, {0, 0, 0}, {float32(math.NaN()), 0}} {
		if _, _, _, _, _, err := lc.Step(a); !errors.Is(err, core.ErrInvalidAction) {
			t.Fatalf("continuous action %v: %v", a, err)
		}
	}
	// Out-of-range continuous actions are clipped, as in Gymnasium.
	if _, _, _, _, _, err := lc.Step([]float32{3, -3}); err != nil {
		t.Fatal(err)
	}
	// After termination.
	for n := 0; n < 2000; n++ {
		if _, _, term, _, _, _ := l.Step([]float32{0}); term {
			break
		}
	}
	if _, _, _, _, _, err := l.Step([]float32{0}); !errors.Is(err, core.ErrNeedsReset) {
		t.Fatalf("Step after termination: %v", err)
	}
	l.Close()
	if _, _, err := l.Reset(0); !errors.Is(err, core.ErrClosed) {
		t.Fatalf("Reset after Close: %v", err)
	}
}

// TestLanderObservationBounds: under the heuristic the observations stay in
// the v3 observation space.
func TestLanderObservationBounds(t *testing.T) {
	l, _ := NewLunarLander(DefaultLunarLanderConfig())
	for ep := 0; ep < 5; ep++ {
		obs, _, _ := l.Reset(int64(100 + ep))
		var a []float32
		for n := 0; n < 1000; n++ {
			if !l.ObservationSpace().Contains(obs) {
				t.Fatalf("episode %d step %d: obs %v outside %v", ep, n, obs, l.ObservationSpace())
			}
			a = Heuristic(a, obs, false)
			var term bool
			obs, _, term, _, _, _ = l.Step(a)
			if term {
				break
			}
		}
	}
}

func equal32(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func BenchmarkLunarLander(b *testing.B) {
	for _, cont := range []bool{false, true} {
		name := "discrete"
		if cont {
			name = "continuous"
		}
		b.Run(name, func(b *testing.B) {
			cfg := DefaultLunarLanderConfig()
			cfg.Continuous = cont
			l, _ := NewLunarLander(cfg)
			obs, _, _ := l.Reset(1)
			var a []float32
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				a = Heuristic(a, obs, cont)
				var term bool
				obs, _, term, _, _, _ = l.Step(a)
				if term {
					obs, _, _ = l.Reset(core.NoSeed)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "steps/s")
		})
	}
}
