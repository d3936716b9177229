package env_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"herd/env"
)

func TestMakeUnknownIDListsKnown(t *testing.T) {
	_, err := env.Make("CartPole-v9")
	if !errors.Is(err, env.ErrUnknownID) {
		t.Fatalf("Make(CartPole-v9): %v, want ErrUnknownID", err)
	}
	for _, id := range env.IDs() {
		if !strings.Contains(err.Error(), id) {
			t.Fatalf("error %q does not list %s", err, id)
		}
	}
}

func TestSpecs(t *testing.T) {
	want := map[string]struct {
		steps     int
		threshold float64
		has       bool
	}{
		"CartPole-v0":              {200, 195, true},
		"CartPole-v1":              {500, 475, true},
		"Pendulum-v1":              {200, 0, false},
		"CartPoleNoVel-v1":         {500, 475, true},
		"PendulumNoVel-v1":         {200, 0, false},
		"MountainCar-v0":           {200, -110, true},
		"MountainCarContinuous-v0": {999, 90, true},
		"Acrobot-v1":               {500, -100, true},
		"LunarLander-v3":           {1000, 200, true},
		"LunarLanderContinuous-v3": {1000, 200, true},
		"toy/GoalLine-v0":          {20, 0, false},
		"Probe/Bandit-v0":          {0, 0, false},
		"Probe/Corridor-v0":        {15, 0, false},
	}
	for _, g := range []string{"Asterix", "Breakout", "Freeway", "Seaquest", "SpaceInvaders"} {
		want["MinAtar/"+g+"-v0"] = struct {
			steps     int
			threshold float64
			has       bool
		}{}
		want["MinAtar/"+g+"-v1"] = want["MinAtar/"+g+"-v0"]
	}
	if len(env.IDs()) != len(want) {
		t.Fatalf("IDs() = %v", env.IDs())
	}
	for id, w := range want {
		s, err := env.SpecOf(id)
		if err != nil {
			t.Fatal(err)
		}
		if s.MaxEpisodeSteps != w.steps || s.HasRewardThreshold != w.has || s.RewardThreshold != w.threshold {
			t.Errorf("%s: spec %+v, want %+v", id, s, w)
		}
	}
}

// TestMakeTimeLimit runs each classic env with a random policy until the
// TimeLimit truncates (or it terminates) and checks the episode length.
func TestMakeTimeLimit(t *testing.T) {
	for _, id := range []string{"CartPole-v1", "Pendulum-v1", "MountainCar-v0", "MountainCarContinuous-v0", "Acrobot-v1"} {
		e, err := env.Make(id, env.WithMaxEpisodeSteps(37))
		if err != nil {
			t.Fatal(err)
		}
		r := testRand(id)
		e.Reset(1)
		var a []float32
		n := 0
		for {
			a = e.ActionSpace().SampleTo(a, r)
			_, _, term, trunc, _, err := e.Step(a)
			if err != nil {
				t.Fatal(err)
			}
			n++
			if term || trunc {
				if trunc != (n == 37) || n > 37 {
					t.Fatalf("%s: episode ended at step %d with truncated=%v, limit 37", id, n, trunc)
				}
				break
			}
		}
		if _, _, _, _, _, err := e.Step(a); !errors.Is(err, env.ErrNeedsReset) {
			t.Fatalf("%s: Step after the end: %v, want ErrNeedsReset", id, err)
		}
	}
	// Pendulum never terminates: Make's default limit truncates at 200.
	e, _ := env.Make("Pendulum-v1")
	e.Reset(0)
	for i := 1; i <= 200; i++ {
		_, _, term, trunc, _, err := e.Step([]float32{0})
		if err != nil || term || trunc != (i == 200) {
			t.Fatalf("Pendulum step %d: terminated %v truncated %v err %v", i, term, trunc, err)
		}
	}
	// WithoutTimeLimit: no truncation.
	e, _ = env.Make("Pendulum-v1", env.WithoutTimeLimit())
	e.Reset(0)
	for i := 0; i < 300; i++ {
		if _, _, _, trunc, _, _ := e.Step([]float32{0}); trunc {
			t.Fatal("truncated without a TimeLimit")
		}
	}
}

func TestMakeKwargs(t *testing.T) {
	if _, err := env.Make("CartPole-v1", env.WithKwargs(env.Kwargs{"gravity": 1.0})); !errors.Is(err, env.ErrInvalidOption) {
		t.Fatalf("unknown kwarg: %v, want ErrInvalidOption", err)
	}
	if _, err := env.Make("Pendulum-v1", env.WithKwargs(env.Kwargs{"g": "high"})); !errors.Is(err, env.ErrInvalidOption) {
		t.Fatalf("g = \"high\": %v, want ErrInvalidOption", err)
	}
	if _, err := env.Make("Acrobot-v1", env.WithKwargs(env.Kwargs{"book_or_nips": "paper"})); !errors.Is(err, env.ErrInvalidOption) {
		t.Fatalf("book_or_nips paper: %v", err)
	}
	// g changes the dynamics.
	obsAfter := func(kw env.Kwargs) float32 {
		e, err := env.Make("Pendulum-v1", env.WithKwargs(kw))
		if err != nil {
			t.Fatal(err)
		}
		env.Unwrapped(e).(env.Stater).SetState([]float64{1, 0})
		obs, _, _, _, _, _ := e.Step([]float32{0})
		return obs[2]
	}
	if a, b := obsAfter(nil), obsAfter(env.Kwargs{"g": 9.81}); a == b {
		t.Fatalf("g = 9.81 gives the same θ̇ %v as g = 10", a)
	}
	if _, err := env.Make("Acrobot-v1", env.WithKwargs(env.Kwargs{"book_or_nips": "nips"})); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Make("CartPole-v1", env.WithMaxEpisodeSteps(-3)); !errors.Is(err, env.ErrInvalidOption) {
		t.Fatalf("negative max steps: %v", err)
	}
}

func TestMakeLunarLander(t *testing.T) {
	d, err := env.Make("LunarLander-v3")
	if err != nil {
		t.Fatal(err)
	}
	if sp, ok := d.ActionSpace().(env.Discrete); !ok || sp.N != 4 {
		t.Fatalf("LunarLander-v3 action space %v, want Discrete(4)", d.ActionSpace())
	}
	c, err := env.Make("LunarLanderContinuous-v3")
	if err != nil {
		t.Fatal(err)
	}
	if sp, ok := c.ActionSpace().(env.Box); !ok || sp.Dim() != 2 {
		t.Fatalf("LunarLanderContinuous-v3 action space %v, want Box(2)", c.ActionSpace())
	}
	if c.(*env.TimeLimit).MaxSteps() != 1000 {
		t.Fatal("LunarLander time limit is not 1000")
	}
	w, err := env.Make("LunarLander-v3", env.WithKwargs(env.Kwargs{"enable_wind": true, "wind_power": 10.0, "gravity": -5}))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := w.Reset(3); err != nil {
		t.Fatal(err)
	}
	for _, kw := range []env.Kwargs{{"gravity": 0.0}, {"gravity": -12.5}, {"enable_wind": 1}, {"wind": true}} {
		if _, err := env.Make("LunarLander-v3", env.WithKwargs(kw)); !errors.Is(err, env.ErrInvalidOption) {
			t.Fatalf("kwargs %v: %v, want ErrInvalidOption", kw, err)
		}
	}
}

// TestMakeMinAtar: the MinAtar ids give MinAtar's observation shapes, the
// full (-v0) or minimal (-v1) action set, and take MinAtar's keywords.
func TestMakeMinAtar(t *testing.T) {
	for _, c := range []struct {
		id       string
		shape    []int
		nActions int
	}{
		{"MinAtar/Breakout-v0", []int{10, 10, 4}, 6},
		{"MinAtar/Breakout-v1", []int{10, 10, 4}, 3},
		{"MinAtar/Asterix-v1", []int{10, 10, 4}, 5},
		{"MinAtar/Freeway-v1", []int{10, 10, 7}, 3},
		{"MinAtar/Seaquest-v1", []int{10, 10, 10}, 6},
		{"MinAtar/SpaceInvaders-v0", []int{10, 10, 6}, 6},
		{"MinAtar/SpaceInvaders-v1", []int{10, 10, 6}, 4},
	} {
		e, err := env.Make(c.id, env.WithKwargs(env.Kwargs{"sticky_action_prob": 0.0, "difficulty_ramping": false}))
		if err != nil {
			t.Fatalf("%s: %v", c.id, err)
		}
		if sh := e.ObservationSpace().Shape(); len(sh) != 3 || sh[0] != c.shape[0] || sh[1] != c.shape[1] || sh[2] != c.shape[2] {
			t.Errorf("%s: observation shape %v, want %v", c.id, sh, c.shape)
		}
		if d, ok := e.ActionSpace().(env.Discrete); !ok || d.N != c.nActions {
			t.Errorf("%s: action space %v, want Discrete(%d)", c.id, e.ActionSpace(), c.nActions)
		}
		obs, _, err := e.Reset(3)
		if err != nil || !e.ObservationSpace().Contains(obs) {
			t.Fatalf("%s: Reset: %v", c.id, err)
		}
		if _, _, _, _, _, err := e.Step([]float32{float32(c.nActions)}); !errors.Is(err, env.ErrInvalidAction) {
			t.Errorf("%s: action %d: %v, want ErrInvalidAction", c.id, c.nActions, err)
		}
	}
	for _, kw := range []env.Kwargs{{"sticky_action_prob": 1.5}, {"sticky_action_prob": "high"}, {"render_mode": "human"}} {
		if _, err := env.Make("MinAtar/Breakout-v1", env.WithKwargs(kw)); !errors.Is(err, env.ErrInvalidOption) {
			t.Errorf("MinAtar/Breakout-v1 with %v: %v, want ErrInvalidOption", kw, err)
		}
	}
}

// TestNoVelRegistered makes the masked ids through the registry: the
// velocity entries are zero, the others those of the full env.
func TestNoVelRegistered(t *testing.T) {
	for _, c := range []struct {
		id, full string
		vel      []int
	}{{"CartPoleNoVel-v1", "CartPole-v1", []int{1, 3}}, {"PendulumNoVel-v1", "Pendulum-v1", []int{2}}} {
		e, err := env.Make(c.id)
		if err != nil {
			t.Fatal(err)
		}
		f, _ := env.Make(c.full)
		o, _, _ := e.Reset(7)
		fo, _, _ := f.Reset(7)
		masked := append([]float32(nil), fo...)
		for _, i := range c.vel {
			masked[i] = 0
		}
		if fmt.Sprint(o) != fmt.Sprint(masked) {
			t.Errorf("%s: reset obs %v, want %v (%s's %v masked)", c.id, o, masked, c.full, fo)
		}
		e.Close()
		f.Close()
	}
}

// fakeOpener claims the ids with prefix fake:// and records what it opened.
type fakeOpener struct{ opened *[]string }

func (f fakeOpener) Opens(id string) bool { return strings.HasPrefix(id, "fake://") }
func (f fakeOpener) IsParallel(id string) (bool, error) {
	return strings.HasSuffix(id, "/parallel"), nil
}
func (f fakeOpener) Make(id string, o env.Options) (env.Env, error) {
	*f.opened = append(*f.opened, fmt.Sprintf("Make %s stats=%v", id, o.EpisodeStatistics))
	return env.Make("CartPole-v1")
}
func (f fakeOpener) MakeVector(id string, n int, o env.Options) (env.Vector, error) {
	*f.opened = append(*f.opened, fmt.Sprintf("MakeVector %s %d", id, n))
	return env.MakeVector("CartPole-v1", n, env.Sync)
}
func (f fakeOpener) MakeParallel(id string, o env.Options) (env.Parallel, env.FlatOptions, error) {
	*f.opened = append(*f.opened, "MakeParallel "+id)
	p, err := env.MakeParallel("mpe/simple_spread_v3")
	return p, env.FlatOptions{}, err
}
func (f fakeOpener) MakeFlatVector(id string, n int, o env.Options) (env.Vector, error) {
	*f.opened = append(*f.opened, fmt.Sprintf("MakeFlatVector %s %d", id, n))
	return env.MakeVector("mpe/simple_spread_v3", n, env.Sync)
}

// TestMakerOpener: a Maker hands the ids its Opener claims to it (with the
// options read), makes registered ids itself, and the zero Maker refuses a
// remote id naming the package that opens it.
func TestMakerOpener(t *testing.T) {
	var opened []string
	m := env.Maker{Remote: fakeOpener{&opened}}
	for _, f := range []func() (any, error){
		func() (any, error) { return m.Make("fake://a", env.WithEpisodeStatistics()) },
		func() (any, error) { return m.MakeVector("fake://a", 2, env.Sync) },
		func() (any, error) { return m.Make("fake://b/parallel") },
		func() (any, error) { return m.MakeVector("fake://b/parallel", 6, env.Sync) },
		func() (any, error) { return m.Make("CartPole-v1") },
		func() (any, error) { return m.MakeVector("CartPole-v1", 2, env.Sync) },
	} {
		e, err := f()
		if err != nil {
			t.Fatal(err)
		}
		e.(interface{ Close() error }).Close()
	}
	want := []string{"Make fake://a stats=true", "MakeVector fake://a 2", "MakeParallel fake://b/parallel", "MakeFlatVector fake://b/parallel 6"}
	if strings.Join(opened, "|") != strings.Join(want, "|") {
		t.Errorf("opened %q, want %q", opened, want)
	}
	if !m.IsParallel("fake://b/parallel") || m.IsParallel("fake://a") || env.IsParallel("fake://b/parallel") {
		t.Error("IsParallel does not ask the Opener for its ids only")
	}
	for _, id := range []string{"grpc://127.0.0.1:1/CartPole-v1", "shm://envs/CartPole-v1"} {
		if _, err := env.Make(id); !errors.Is(err, env.ErrUnknownID) || !strings.Contains(err.Error(), "herd/env/remote") {
			t.Errorf("zero Maker, %s: %v", id, err)
		}
	}
}
