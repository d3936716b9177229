package classic

import (
	"errors"
	"math"
	"testing"

	"herd/env/internal/core"
)

// stateful is what every classic env offers.
type stateful interface {
	core.Env
	core.Stater
}

func allEnvs(t *testing.T) map[string]stateful {
	t.Helper()
	acro, err := NewAcrobot(AcrobotConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return map[string]stateful{
		"CartPole":              NewCartPole(CartPoleConfig{}),
		"Pendulum":              NewPendulum(PendulumConfig{}),
		"MountainCar":           NewMountainCar(MountainCarConfig{}),
		"MountainCarContinuous": NewMountainCarContinuous(MountainCarConfig{}),
		"Acrobot":               acro,
	}
}

// TestResetDistributions checks Gymnasium's reset ranges over many seeds,
// that the draws spread over the range (not stuck at one end), and the
// Acrobot's float32-rounded start state.
func TestResetDistributions(t *testing.T) {
	bounds := map[string][][2]float64{
		"CartPole":              {{-0.05, 0.05}, {-0.05, 0.05}, {-0.05, 0.05}, {-0.05, 0.05}},
		"Pendulum":              {{-math.Pi, math.Pi}, {-1, 1}},
		"MountainCar":           {{-0.6, -0.4}, {0, 0}},
		"MountainCarContinuous": {{-0.6, -0.4}, {0, 0}},
		"Acrobot":               {{-0.1, 0.1}, {-0.1, 0.1}, {-0.1, 0.1}, {-0.1, 0.1}},
	}
	for name, e := range allEnvs(t) {
		b := bounds[name]
		lo, hi := make([]float64, len(b)), make([]float64, len(b))
		for i := range lo {
			lo[i], hi[i] = math.Inf(1), math.Inf(-1)
		}
		const n = 2000
		for seed := int64(0); seed < n; seed++ {
			obs, _, err := e.Reset(seed)
			if err != nil {
				t.Fatal(err)
			}
			if !e.ObservationSpace().Contains(obs) {
				t.Fatalf("%s seed %d: reset obs %v outside %v", name, seed, obs, e.ObservationSpace())
			}
			s := e.StateTo(nil)
			for i, v := range s {
				if v < b[i][0] || v > b[i][1] || (b[i][0] != b[i][1] && v == b[i][1]) {
					t.Fatalf("%s seed %d: state[%d] = %v outside [%v, %v)", name, seed, i, v, b[i][0], b[i][1])
				}
				lo[i], hi[i] = min(lo[i], v), max(hi[i], v)
				if name == "Acrobot" && float64(float32(v)) != v {
					t.Fatalf("Acrobot reset state %v not float32-rounded", s)
				}
			}
		}
		for i := range b {
			width := b[i][1] - b[i][0]
			if lo[i]-b[i][0] > 0.01*width || b[i][1]-hi[i] > 0.01*width {
				t.Fatalf("%s state[%d]: %d resets cover [%v, %v] of [%v, %v]", name, i, n, lo[i], hi[i], b[i][0], b[i][1])
			}
		}
	}
}

// TestSeededReproducibility: the same seed gives the same start and
// trajectory; NoSeed continues the stream; different seeds differ.
func TestSeededReproducibility(t *testing.T) {
	for name, e := range allEnvs(t) {
		run := func(seed int64) []float32 {
			var out []float32
			obs, _, _ := e.Reset(seed)
			out = append(out, obs...)
			obs, _, _ = e.Reset(core.NoSeed)
			out = append(out, obs...)
			return out
		}
		a, b, c := run(7), run(7), run(8)
		if !equal32(a, b) {
			t.Fatalf("%s: seed 7 twice gives %v and %v", name, a, b)
		}
		if equal32(a, c) {
			t.Fatalf("%s: seeds 7 and 8 both give %v", name, a)
		}
		d := len(a) / 2
		if equal32(a[:d], a[d:]) {
			t.Fatalf("%s: Reset(NoSeed) repeated the seeded start %v", name, a[:d])
		}
	}
	// An env that was never seeded behaves as seeded with 0.
	x, y := NewCartPole(CartPoleConfig{}), NewCartPole(CartPoleConfig{})
	ox, _, _ := x.Reset(core.NoSeed)
	oy, _, _ := y.Reset(0)
	if !equal32(ox, oy) {
		t.Fatalf("unseeded %v, seed 0 %v", ox, oy)
	}
}

func TestSetStateAndClose(t *testing.T) {
	for name, e := range allEnvs(t) {
		n := len(e.StateTo(nil))
		if _, err := e.SetState(make([]float64, n+1)); !errors.Is(err, core.ErrInvalidState) {
			t.Fatalf("%s: SetState of wrong length: %v", name, err)
		}
		bad := make([]float64, n)
		bad[0] = math.NaN()
		if _, err := e.SetState(bad); !errors.Is(err, core.ErrInvalidState) {
			t.Fatalf("%s: SetState(NaN): %v", name, err)
		}
		want := make([]float64, n)
		for i := range want {
			want[i] = 0.01 * float64(i+1)
		}
		if _, err := e.SetState(want); err != nil {
			t.Fatal(err)
		}
		if got := e.StateTo(make([]float64, 0, 8)); !equal64(got, want) {
			t.Fatalf("%s: StateTo after SetState(%v) = %v", name, want, got)
		}
		a := e.ActionSpace().SampleTo(nil, rngFor(name))
		if _, _, _, _, _, err := e.Step(a); err != nil {
			t.Fatalf("%s: Step after SetState: %v", name, err)
		}
		if _, _, _, _, _, err := e.Step([]float32{1, 2, 3}); !errors.Is(err, core.ErrInvalidAction) {
			t.Fatalf("%s: 3-value action: %v", name, err)
		}
		if _, _, _, _, _, err := e.Step([]float32{float32(math.Inf(1))}); !errors.Is(err, core.ErrInvalidAction) {
			t.Fatalf("%s: +Inf action: %v", name, err)
		}
		e.Close()
		if _, _, err := e.Reset(0); !errors.Is(err, core.ErrClosed) {
			t.Fatalf("%s: Reset after Close: %v", name, err)
		}
		if _, _, _, _, _, err := e.Step(a); !errors.Is(err, core.ErrClosed) {
			t.Fatalf("%s: Step after Close: %v", name, err)
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

func equal64(a, b []float64) bool {
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
