package classic

import (
	"errors"
	"math"
	"testing"

	"herd/env/internal/core"
	"herd/internal/rng"
)

// tol is the agreement the ports promise (package doc) (float64 state and
// reward), relative to max(1, |value|).
const tol = 1e-12

func step(t *testing.T, e core.Env, a float32) ([]float32, float64, bool) {
	t.Helper()
	obs, r, term, trunc, _, err := e.Step([]float32{a})
	if err != nil {
		t.Fatal(err)
	}
	if trunc {
		t.Fatal("a classic env never truncates by itself")
	}
	return obs, r, term
}

func setState(t *testing.T, st core.Stater, s []float64) {
	t.Helper()
	if _, err := st.SetState(s); err != nil {
		t.Fatal(err)
	}
}

func checkObs(t *testing.T, what string, obs []float32, want ...float64) {
	t.Helper()
	for i, w := range want {
		if obs[i] != float32(w) {
			t.Fatalf("%s: obs[%d] = %v, want float32(%v) = %v", what, i, obs[i], w, float32(w))
		}
	}
}

// goldenCartPole compares one step from s with the reference.
func goldenCartPole(t *testing.T, c *CartPole, s [4]float64, a int) bool {
	t.Helper()
	setState(t, c, s[:])
	obs, r, term := step(t, c, float32(a))
	want, wantTerm := refCartPole(s, a)
	got := c.StateTo(nil)
	for i := range want {
		if far(got[i], want[i], tol) {
			t.Fatalf("CartPole s=%v a=%d: state[%d] = %.17g, reference %.17g", s, a, i, got[i], want[i])
		}
	}
	if term != wantTerm {
		t.Fatalf("CartPole s=%v a=%d: terminated %v, reference %v (next %v)", s, a, term, wantTerm, want)
	}
	if r != 1 {
		t.Fatalf("CartPole reward %v, want 1 (also on the terminating step)", r)
	}
	checkObs(t, "CartPole", obs, got...)
	return term
}

func TestCartPoleGolden(t *testing.T) {
	c := NewCartPole(CartPoleConfig{})
	if c.thetaThreshold != 0.20943951023931953 || c.totalMass != 1.1 || c.poleMassLength != 0.05 {
		t.Fatalf("constants differ from Python's float64: θ_max %.17g, M %.17g, m_p·l %.17g", c.thetaThreshold, c.totalMass, c.poleMassLength)
	}
	r := rng.New(1, "test/cartpole", 0)
	terms := 0
	for i := 0; i < 600; i++ {
		s := [4]float64{(r.Float64()*2 - 1) * 2.6, (r.Float64()*2 - 1) * 3, (r.Float64()*2 - 1) * 0.25, (r.Float64()*2 - 1) * 4}
		if goldenCartPole(t, c, s, r.IntN(2)) {
			terms++
		}
	}
	if terms < 30 || terms > 570 {
		t.Fatalf("%d of 600 random steps terminated; the sample misses one side of the thresholds", terms)
	}
	// Thresholds: just inside and just outside in x and θ, both pushes.
	for _, s := range [][4]float64{
		{2.39, 0.6, 0, 0}, {2.39, 0.4, 0, 0}, {-2.39, -0.6, 0, 0}, {-2.39, -0.4, 0, 0},
		{0, 0, 0.2, 0.5}, {0, 0, 0.2, 0.2}, {0, 0, -0.2, -0.5}, {0, 0, -0.2, -0.2},
	} {
		goldenCartPole(t, c, s, 0)
		goldenCartPole(t, c, s, 1)
	}
	// Explicit Euler: from rest with θ = 0, one step moves only velocities.
	setState(t, c, []float64{0, 0, 0, 0})
	step(t, c, 1)
	if s := c.StateTo(nil); s[0] != 0 || s[2] != 0 || s[1] <= 0 || s[3] >= 0 {
		t.Fatalf("explicit Euler from rest: state %v, want x = θ = 0, ẋ > 0, θ̇ < 0", s)
	}
}

func TestCartPoleTerminationAndReset(t *testing.T) {
	c := NewCartPole(CartPoleConfig{})
	if _, _, _, _, _, err := c.Step([]float32{0}); !errors.Is(err, core.ErrNeedsReset) {
		t.Fatalf("Step before Reset: %v, want ErrNeedsReset", err)
	}
	c.Reset(3)
	setState(t, c, []float64{2.39, 1, 0, 0}) // x′ = 2.41 > 2.4
	_, r, term := step(t, c, 1)
	if !term || r != 1 {
		t.Fatalf("crossing x = 2.4: terminated %v reward %v, want true 1", term, r)
	}
	if _, _, _, _, _, err := c.Step([]float32{0}); !errors.Is(err, core.ErrNeedsReset) {
		t.Fatalf("Step after termination: %v, want ErrNeedsReset", err)
	}
	for _, bad := range [][]float32{{2}, {-1}, {0.5}, {float32(math.NaN())}, {}, {0, 1}} {
		c.Reset(core.NoSeed)
		if _, _, _, _, _, err := c.Step(bad); !errors.Is(err, core.ErrInvalidAction) {
			t.Fatalf("action %v: %v, want ErrInvalidAction", bad, err)
		}
	}
	sb := NewCartPole(CartPoleConfig{SuttonBartoReward: true})
	sb.Reset(0)
	_, r0, _ := step(t, sb, 0)
	setState(t, sb, []float64{2.39, 1, 0, 0})
	_, r1, term1 := step(t, sb, 1)
	if r0 != 0 || r1 != -1 || !term1 {
		t.Fatalf("sutton_barto_reward: rewards %v, %v (terminated %v), want 0, −1, true", r0, r1, term1)
	}
}

func TestPendulumGolden(t *testing.T) {
	for _, g := range []float64{10, 9.81} {
		p := NewPendulum(PendulumConfig{G: g})
		r := rng.New(2, "test/pendulum", 0)
		clipped := 0
		for i := 0; i < 600; i++ {
			// θ far outside [−π, π] too: the state is never wrapped.
			s := [2]float64{(r.Float64()*2 - 1) * 20, (r.Float64()*2 - 1) * 8}
			u := float32((r.Float64()*2 - 1) * 3) // beyond ±2 to exercise the clip
			goldenPendulum(t, p, s, u, g)
			if math.Abs(float64(u)) > 2 {
				clipped++
			}
		}
		if clipped < 30 {
			t.Fatalf("only %d clipped torques sampled", clipped)
		}
	}
	p := NewPendulum(PendulumConfig{})
	// Velocity clip at ±8 and unwrapped θ.
	goldenPendulum(t, p, [2]float64{1.5, 7.9}, 2, 10)
	if s := p.StateTo(nil); s[1] != 8 {
		t.Fatalf("θ̇ not clipped to 8: %v", s)
	}
	goldenPendulum(t, p, [2]float64{7 * math.Pi, 0}, 0, 10)
	if s := p.StateTo(nil); s[0] < 3*math.Pi {
		t.Fatalf("θ was wrapped in the state: %v", s)
	}
	// Reward from the PRE-step state: upright at rest with no torque costs 0.
	setState(t, p, []float64{0, 0})
	if _, r, _ := step(t, p, 0); r != 0 {
		t.Fatalf("upright at rest: reward %v, want 0", r)
	}
}

func goldenPendulum(t *testing.T, p *Pendulum, s [2]float64, u float32, g float64) {
	t.Helper()
	setState(t, p, s[:])
	obs, r, term := step(t, p, u)
	want, wantR := refPendulum(s, float64(u), g)
	got := p.StateTo(nil)
	for i := range want {
		if far(got[i], want[i], tol) {
			t.Fatalf("Pendulum g=%v s=%v u=%v: state[%d] = %.17g, reference %.17g", g, s, u, i, got[i], want[i])
		}
	}
	if far(r, wantR, tol) || term {
		t.Fatalf("Pendulum s=%v u=%v: reward %.17g terminated %v, reference %.17g false", s, u, r, term, wantR)
	}
	checkObs(t, "Pendulum", obs, math.Cos(got[0]), math.Sin(got[0]), got[1])
}

func TestAngleNormalize(t *testing.T) {
	for _, c := range []struct{ in, want float64 }{
		{0, 0}, {math.Pi / 2, math.Pi / 2}, {-math.Pi / 2, -math.Pi / 2},
		{3 * math.Pi / 2, -math.Pi / 2}, {-3 * math.Pi / 2, math.Pi / 2},
		{math.Pi, -math.Pi}, // Python: ((π + π) % 2π) − π = −π
		{5, 5 - 2*math.Pi}, {-5, -5 + 2*math.Pi},
	} {
		if got := AngleNormalize(c.in); math.Abs(got-c.want) > 1e-15 {
			t.Errorf("AngleNormalize(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

func TestMountainCarGolden(t *testing.T) {
	c := NewMountainCar(MountainCarConfig{})
	// Hand-checked with Python floats (Gymnasium's arithmetic): from
	// (−0.5, 0) with action 1.
	setState(t, c, []float64{-0.5, 0})
	step(t, c, 1)
	if s := c.StateTo(nil); s[0] != -0.5001768430041692 || s[1] != -0.00017684300416925727 {
		t.Fatalf("from (−0.5, 0), action 1: %.17g, want Python's (−0.5001768430041692, −0.00017684300416925727)", s)
	}
	r := rng.New(3, "test/mountaincar", 0)
	terms, walls := 0, 0
	for i := 0; i < 1000; i++ {
		s := [2]float64{-1.2 + r.Float64()*1.8, (r.Float64()*2 - 1) * 0.07}
		if i%10 == 0 {
			s[0] = -1.2 + r.Float64()*0.02 // near the left wall
		}
		term := goldenMountainCar(t, c, s, r.IntN(3))
		if term {
			terms++
		}
		if got := c.StateTo(nil); got[0] == -1.2 {
			walls++
		}
	}
	if terms < 20 || walls < 20 {
		t.Fatalf("sample hit the goal %d times and the wall %d times; want both ≥ 20", terms, walls)
	}
	// Left wall: a negative velocity into the wall is zeroed.
	goldenMountainCar(t, c, [2]float64{-1.19, -0.05}, 0)
	if s := c.StateTo(nil); s[0] != -1.2 || s[1] != 0 {
		t.Fatalf("left wall: state %v, want (−1.2, 0)", s)
	}
	// Velocity clip at 0.07.
	goldenMountainCar(t, c, [2]float64{-0.5, 0.0699}, 2)
	if s := c.StateTo(nil); s[1] != 0.07 {
		t.Fatalf("velocity not clipped at 0.07: %v", s)
	}
	// Goal at 0.5.
	if !goldenMountainCar(t, c, [2]float64{0.49, 0.02}, 2) {
		t.Fatal("crossing p = 0.5 with v > 0 did not terminate")
	}
	if goldenMountainCar(t, c, [2]float64{0.44, 0.005}, 1) {
		t.Fatal("MountainCar-v0 terminated below 0.5")
	}
	// goal_velocity: reaching 0.5 too slowly does not count.
	slow := NewMountainCar(MountainCarConfig{GoalVelocity: 0.05})
	if goldenMountainCarWith(t, slow, [2]float64{0.49, 0.02}, 2, 0.05) {
		t.Fatal("goal_velocity 0.05 ignored")
	}
}

func goldenMountainCar(t *testing.T, c *MountainCar, s [2]float64, a int) bool {
	t.Helper()
	return goldenMountainCarWith(t, c, s, a, 0)
}

func goldenMountainCarWith(t *testing.T, c *MountainCar, s [2]float64, a int, goalVel float64) bool {
	t.Helper()
	setState(t, c, s[:])
	obs, r, term := step(t, c, float32(a))
	want, wantTerm := refMountainCar(s, a)
	if goalVel != 0 {
		wantTerm = wantTerm && want[1] >= goalVel
	}
	got := c.StateTo(nil)
	for i := range want {
		if far(got[i], want[i], tol) {
			t.Fatalf("MountainCar s=%v a=%d: state[%d] = %.17g, reference %.17g", s, a, i, got[i], want[i])
		}
	}
	if term != wantTerm || r != -1 {
		t.Fatalf("MountainCar s=%v a=%d: terminated %v reward %v, reference %v −1", s, a, term, r, wantTerm)
	}
	checkObs(t, "MountainCar", obs, got...)
	return term
}

func TestMountainCarContinuousGolden(t *testing.T) {
	c := NewMountainCarContinuous(MountainCarConfig{})
	r := rng.New(4, "test/mcc", 0)
	terms := 0
	for i := 0; i < 1000; i++ {
		s := [2]float64{-1.2 + r.Float64()*1.8, (r.Float64()*2 - 1) * 0.07}
		a := float32((r.Float64()*2 - 1) * 2)
		if goldenMCC(t, c, s, a) {
			terms++
		}
	}
	if terms < 20 {
		t.Fatalf("sample reached the goal %d times", terms)
	}
	// Goal at 0.45, not 0.5.
	if !goldenMCC(t, c, [2]float64{0.44, 0.02}, 0) {
		t.Fatal("crossing 0.45 did not terminate")
	}
	// The reward penalises the UNCLIPPED action while the force is clipped.
	setState(t, c, []float64{-0.5, 0})
	_, r3, _ := step(t, c, 3)
	s3 := c.StateTo(nil)
	setState(t, c, []float64{-0.5, 0})
	_, r1, _ := step(t, c, 1)
	s1 := c.StateTo(nil)
	if s3[0] != s1[0] || s3[1] != s1[1] || math.Abs(r3-(-0.9)) > tol || math.Abs(r1-(-0.1)) > tol {
		t.Fatalf("action 3 vs 1: states %v %v (want equal), rewards %v %v (want −0.9, −0.1)", s3, s1, r3, r1)
	}
	// State stored as float32 after a step.
	if float64(float32(s1[0])) != s1[0] || float64(float32(s1[1])) != s1[1] {
		t.Fatalf("state %v is not float32-rounded", s1)
	}
	// Left wall.
	goldenMCC(t, c, [2]float64{-1.19, -0.05}, -1)
	if s := c.StateTo(nil); s[0] != float64(float32(-1.2)) || s[1] != 0 {
		t.Fatalf("left wall: %v", s)
	}
}

func goldenMCC(t *testing.T, c *MountainCarContinuous, s [2]float64, a float32) bool {
	t.Helper()
	setState(t, c, s[:])
	obs, r, term := step(t, c, a)
	want, wantR, wantTerm := refMountainCarContinuous(s, float64(a))
	got := c.StateTo(nil)
	for i := range want {
		if far(got[i], want[i], tol) {
			t.Fatalf("MountainCarContinuous s=%v a=%v: state[%d] = %.17g, reference %.17g", s, a, i, got[i], want[i])
		}
	}
	if term != wantTerm || far(r, wantR, tol) {
		t.Fatalf("MountainCarContinuous s=%v a=%v: terminated %v reward %.17g, reference %v %.17g", s, a, term, r, wantTerm, wantR)
	}
	checkObs(t, "MountainCarContinuous", obs, got...)
	return term
}

func TestAcrobotGolden(t *testing.T) {
	for _, variant := range []string{"book", "nips"} {
		a, err := NewAcrobot(AcrobotConfig{BookOrNips: variant})
		if err != nil {
			t.Fatal(err)
		}
		if a.maxVel1 != 12.566370614359172 || a.maxVel2 != 28.274333882308138 {
			t.Fatalf("velocity limits %.17g %.17g differ from Python's 4π, 9π", a.maxVel1, a.maxVel2)
		}
		r := rng.New(5, "test/acrobot/"+variant, 0)
		terms, clipped, wrapped := 0, 0, 0
		n := 300
		if raceEnabled {
			n = 100
		}
		for i := 0; i < n; i++ {
			s := [4]float64{(r.Float64()*2 - 1) * math.Pi, (r.Float64()*2 - 1) * math.Pi,
				(r.Float64()*2 - 1) * 4 * math.Pi, (r.Float64()*2 - 1) * 9 * math.Pi}
			if goldenAcrobot(t, a, s, r.IntN(3), variant == "nips") {
				terms++
			}
			got := a.StateTo(nil)
			if math.Abs(got[2]) == a.maxVel1 || math.Abs(got[3]) == a.maxVel2 {
				clipped++
			}
			if math.Abs(got[0]-s[0]) > math.Pi || math.Abs(got[1]-s[1]) > math.Pi {
				wrapped++
			}
		}
		if terms < n/30 || clipped < n/30 || wrapped < n/30 {
			t.Fatalf("%s: %d samples terminated %d, clipped %d, wrapped %d times; want each ≥ %d", variant, n, terms, clipped, wrapped, n/30)
		}
	}
	// book and nips differ when θ̇₁ ≠ 0 and sin θ₂ ≠ 0.
	book, _ := NewAcrobot(AcrobotConfig{})
	nips, _ := NewAcrobot(AcrobotConfig{BookOrNips: "nips"})
	s := []float64{0.3, 0.5, 2, 0}
	setState(t, book, s)
	setState(t, nips, s)
	step(t, book, 2)
	step(t, nips, 2)
	if sb, sn := book.StateTo(nil), nips.StateTo(nil); sb[3] == sn[3] {
		t.Fatalf("book and nips dynamics agree at %v: %v", s, sb)
	}
	if _, err := NewAcrobot(AcrobotConfig{BookOrNips: "paper"}); !errors.Is(err, core.ErrInvalidOption) {
		t.Fatalf("book_or_nips \"paper\": %v, want ErrInvalidOption", err)
	}
}

func goldenAcrobot(t *testing.T, a *Acrobot, s [4]float64, act int, nips bool) bool {
	t.Helper()
	setState(t, a, s[:])
	obs, r, term := step(t, a, float32(act))
	want, wantTerm := refAcrobot(s, act, nips)
	got := a.StateTo(nil)
	for i := range want {
		// Angles that land within 1e-12 of ±π may wrap to either side.
		d := math.Abs(got[i] - want[i])
		if i < 2 && math.Abs(d-2*math.Pi) < 1e-9 {
			continue
		}
		if far(got[i], want[i], tol) {
			t.Fatalf("Acrobot nips=%v s=%v a=%d: state[%d] = %.17g, reference %.17g", nips, s, act, i, got[i], want[i])
		}
	}
	wantR := -1.0
	if wantTerm {
		wantR = 0
	}
	if term != wantTerm || r != wantR {
		t.Fatalf("Acrobot s=%v a=%d: terminated %v reward %v, reference %v %v", s, act, term, r, wantTerm, wantR)
	}
	checkObs(t, "Acrobot", obs, math.Cos(got[0]), math.Sin(got[0]), math.Cos(got[1]), math.Sin(got[1]), got[2], got[3])
	return term
}
