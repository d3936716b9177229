package atari

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"herd/env/internal/core"
)

// fake is a scripted env: step t of an episode (t = 1, 2, …) shows frame
// t, every value of which is obs(t, i); it logs "R<seed>" per reset and
// "S<action>" per step.
type fake struct {
	h, w, c  int
	nActions int
	obs      func(t, i int) float32
	reward   func(t int) float64
	lives    func(t int) int // nil: no lives reported
	termAt   int             // terminate at this step (0: never)
	meanings []string
	still    bool // frames do not change: one buffer, written once

	t   int
	log []string
	buf []float32
}

func (f *fake) ObservationSpace() core.Space { return byteBox(f.h, f.w, f.c) }
func (f *fake) ActionSpace() core.Space      { return core.Discrete{N: f.nActions} }
func (f *fake) Close() error                 { return nil }

func (f *fake) frame() []float32 {
	if f.still && f.buf != nil {
		return f.buf
	}
	f.buf = make([]float32, f.h*f.w*f.c) // fresh: wrappers must not keep it
	for i := range f.buf {
		f.buf[i] = f.obs(f.t, i)
	}
	return f.buf
}

func (f *fake) info() core.Info {
	if f.lives == nil {
		return core.Info{}
	}
	return core.Info{Lives: f.lives(f.t), HasLives: true}
}

func (f *fake) Reset(seed int64) ([]float32, core.Info, error) {
	f.t = 0
	f.log = append(f.log, fmt.Sprintf("R%d", seed))
	return f.frame(), f.info(), nil
}

func (f *fake) Step(a []float32) ([]float32, float64, bool, bool, core.Info, error) {
	f.t++
	f.log = append(f.log, fmt.Sprintf("S%v", a[0]))
	r := 0.0
	if f.reward != nil {
		r = f.reward(f.t)
	}
	return f.frame(), r, f.t == f.termAt, false, f.info(), nil
}

type meaningful struct{ *fake }

func (m meaningful) ActionMeanings() []string { return m.meanings }

func frameValue(t, _ int) float32 { return float32(t) }

func newFake() *fake { return &fake{h: 1, w: 1, c: 1, nActions: 4, obs: frameValue} }

// TestNoopReset: 1…noop_max no-ops (action index 0) after the reset, from
// a stream the seed fixes; an episode ending among them resets again with
// the same seed.
func TestNoopReset(t *testing.T) {
	counts := map[int]bool{}
	for seed := range int64(300) {
		f := newFake()
		n, err := NewNoopReset(f, 5)
		if err != nil {
			t.Fatal(err)
		}
		obs, _, err := n.Reset(seed)
		if err != nil {
			t.Fatal(err)
		}
		k := len(f.log) - 1
		if k < 1 || k > 5 || f.log[0] != fmt.Sprintf("R%d", seed) || obs[0] != float32(k) {
			t.Fatalf("seed %d: log %v, obs %v", seed, f.log, obs)
		}
		for _, s := range f.log[1:] {
			if s != "S0" {
				t.Fatalf("seed %d: log %v, want no-ops S0", seed, f.log)
			}
		}
		counts[k] = true
		f.log = nil
		n.Reset(seed)
		if len(f.log)-1 != k {
			t.Fatalf("seed %d: %d no-ops, then %d with the same seed", seed, k, len(f.log)-1)
		}
	}
	if len(counts) != 5 {
		t.Errorf("no-op counts seen %v, want all of 1…5", counts)
	}

	// An episode that ends at step 2 among the no-ops: reset with the same
	// seed, and carry on counting.
	for seed := range int64(50) {
		f := newFake()
		f.termAt = 2
		n, _ := NewNoopReset(f, 30)
		n.Reset(seed)
		k, want := 0, []string{fmt.Sprintf("R%d", seed)}
		for _, s := range f.log[1:] {
			if s == "S0" {
				k++
			}
		}
		for i := range k {
			want = append(want, "S0")
			if i%2 == 1 {
				want = append(want, fmt.Sprintf("R%d", seed))
			}
		}
		if !slices.Equal(f.log, want) {
			t.Fatalf("seed %d: log %v, want %v", seed, f.log, want)
		}
	}
	if _, err := NewNoopReset(newFake(), 0); err == nil {
		t.Error("noop_max 0 accepted")
	}
}

// TestNoopResetNoSeed: a reset without a seed continues the stream.
func TestNoopResetNoSeed(t *testing.T) {
	f := newFake()
	n, _ := NewNoopReset(f, 30)
	var ks []int
	for range 8 {
		f.log = nil
		n.Reset(core.NoSeed)
		ks = append(ks, len(f.log)-1)
	}
	if slices.Equal(ks[:4], ks[4:]) || slices.Min(ks) == slices.Max(ks) {
		t.Errorf("no-op counts %v repeat", ks)
	}
}

// TestMaxAndSkip: the action repeated 4 times, rewards summed, the
// elementwise max of frames 3 and 4; an episode ending at the 2nd frame
// leaves the buffer as it was (SB3).
func TestMaxAndSkip(t *testing.T) {
	f := &fake{h: 1, w: 2, c: 1, nActions: 2, reward: func(t int) float64 { return float64(t) },
		obs: func(t, i int) float32 {
			if i == 0 {
				return float32(t)
			}
			return float32(20 - 3*(t%4)) // frames 3, 4: 11, 20
		}}
	m, err := NewMaxAndSkip(f, 4)
	if err != nil {
		t.Fatal(err)
	}
	m.Reset(1)
	obs, r, term, _, _, err := m.Step([]float32{1})
	if err != nil || !slices.Equal(obs, []float32{4, 20}) || r != 1+2+3+4 || term {
		t.Fatalf("step 1: obs %v r %v term %v err %v, want [4 20] 10 false", obs, r, term, err)
	}
	if want := []string{"R1", "S1", "S1", "S1", "S1"}; !slices.Equal(f.log, want) {
		t.Fatalf("log %v, want %v", f.log, want)
	}
	obs, r, _, _, _, _ = m.Step([]float32{0}) // frames 5…8: 7, 8 and 11, 20
	if !slices.Equal(obs, []float32{8, 20}) || r != 5+6+7+8 {
		t.Fatalf("step 2: obs %v r %v, want [8 20] 26", obs, r)
	}
	// Ends at frame 10, the 2nd of the step: nothing written this step.
	f.termAt = 10
	obs, r, term, _, _, _ = m.Step([]float32{0})
	if !slices.Equal(obs, []float32{8, 20}) || r != 9+10 || !term {
		t.Fatalf("early end: obs %v r %v term %v, want the previous [8 20], 19, true", obs, r, term)
	}
	// Ends at frame 3 of a new episode: only the first slot refreshed.
	f.termAt = 3
	m.Reset(2)
	obs, _, term, _, _, _ = m.Step([]float32{0})
	if !slices.Equal(obs, []float32{8, 20}) || !term { // max([3, 11], [8, 20])
		t.Fatalf("end at 3: obs %v term %v, want [8 20] true", obs, term)
	}
	g := &fake{h: 1, w: 1, c: 1, nActions: 2, obs: frameValue}
	g.termAt = 3
	m, _ = NewMaxAndSkip(g, 4)
	m.Reset(1)
	if obs, _, _, _, _, _ := m.Step([]float32{0}); obs[0] != 3 { // max(3, 0): the zero buffer
		t.Fatalf("fresh buffer, end at 3: obs %v, want [3]", obs)
	}
	if _, err := NewMaxAndSkip(g, 0); err == nil {
		t.Error("skip 0 accepted")
	}
}

// TestEpisodicLife: a lost life terminates; the next Reset steps a no-op
// instead of resetting; a real game over resets.
func TestEpisodicLife(t *testing.T) {
	f := newFake()
	f.lives = func(t int) int { return 3 - t/2 } // 3, 3, 2, 2, 1, 1, 0 at step 6
	f.termAt = 6
	l, err := NewEpisodicLife(f)
	if err != nil {
		t.Fatal(err)
	}
	l.Reset(5)
	var got []bool
	for range 2 {
		_, _, term, _, _, err := l.Step([]float32{3})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, term)
	}
	if !slices.Equal(got, []bool{false, true}) {
		t.Fatalf("terms %v, want [false true] (life lost at step 2)", got)
	}
	if _, _, _, _, _, err := l.Step([]float32{3}); !errors.Is(err, core.ErrNeedsReset) {
		t.Fatalf("step after a lost life without reset: %v, want ErrNeedsReset", err)
	}
	f.log = nil
	obs, info, err := l.Reset(6)
	if err != nil || !slices.Equal(f.log, []string{"S0"}) || obs[0] != 3 || info.Lives != 2 {
		t.Fatalf("reset after a lost life: log %v obs %v lives %d err %v, want one no-op at step 3", f.log, obs, info.Lives, err)
	}
	_, _, term, _, _, _ := l.Step([]float32{3}) // step 4: lives 1
	if !term {
		t.Fatal("life lost at step 4 not terminal")
	}
	l.Reset(7)                                 // no-op step 5, lives 1
	_, _, term, _, _, _ = l.Step([]float32{3}) // step 6: game over, lives 0
	if !term {
		t.Fatal("game over not terminal")
	}
	f.log = nil
	l.Reset(8)
	if !slices.Equal(f.log, []string{"R8"}) {
		t.Fatalf("reset after game over: log %v, want [R8]", f.log)
	}

	// A no-op reset step that ends the game resets for real.
	f.log = nil
	f.t, f.termAt = 0, 2
	f.lives = func(t int) int { return 2 - t } // 2, 1 at step 1
	l.Reset(1)
	if _, _, term, _, _, _ := l.Step([]float32{1}); !term {
		t.Fatal("life loss at step 1 not terminal")
	}
	l.Reset(9)
	if want := []string{"R1", "S1", "S0", "R9"}; !slices.Equal(f.log, want) {
		t.Fatalf("log %v, want %v", f.log, want)
	}

	// Lives reaching 0 while the game goes on is no life lost (SB3's
	// 0 < lives): games whose last life is number 0.
	f.t, f.termAt = 0, 0
	f.lives = func(t int) int { return 1 - t }
	l.Reset(1)
	if _, _, term, _, _, _ := l.Step([]float32{1}); term {
		t.Fatal("lives 1 → 0 without game over terminated")
	}

	g := newFake()
	l, _ = NewEpisodicLife(g)
	if _, _, err := l.Reset(1); !errors.Is(err, core.ErrInvalidOption) || !strings.Contains(err.Error(), "lives") {
		t.Errorf("env without lives: %v", err)
	}
}

// TestFireReset: reset, FIRE (index 1), index 2, each ending episode reset
// again with the seed; the reset info is empty.
func TestFireReset(t *testing.T) {
	f := newFake()
	f.lives = func(int) int { return 4 }
	fr, err := NewFireReset(f)
	if err != nil {
		t.Fatal(err)
	}
	obs, info, _ := fr.Reset(3)
	if want := []string{"R3", "S1", "S2"}; !slices.Equal(f.log, want) || obs[0] != 2 || info.HasLives {
		t.Fatalf("log %v obs %v info %+v, want %v, obs [2], empty info", f.log, obs, info, want)
	}
	f.log, f.termAt = nil, 1
	fr.Reset(4)
	if want := []string{"R4", "S1", "R4", "S2", "R4"}; !slices.Equal(f.log, want) {
		t.Fatalf("ending steps: log %v, want %v", f.log, want)
	}
	if _, err := NewFireReset(&fake{h: 1, w: 1, c: 1, nActions: 2, obs: frameValue}); err == nil {
		t.Error("2 actions accepted")
	}
}

// TestFireResetKeepsObservation: the second step's observation survives the
// reset after it (SB3 returns it), though the inner env reuses its buffer.
func TestFireResetKeepsObservation(t *testing.T) {
	f := &reusing{fake: newFake()}
	f.termAt = 1
	fr, _ := NewFireReset(f)
	obs, _, _ := fr.Reset(1)
	if obs[0] != 1 { // the step-2 frame of the second episode is t = 1
		t.Fatalf("obs %v, want [1]", obs)
	}
}

// reusing returns the same slice every time, as envs may.
type reusing struct {
	*fake
	out []float32
}

func (r *reusing) own(obs []float32) []float32 {
	r.out = append(r.out[:0], obs...)
	return r.out
}

func (r *reusing) Reset(seed int64) ([]float32, core.Info, error) {
	obs, info, err := r.fake.Reset(seed)
	return r.own(obs), info, err
}

func (r *reusing) Step(a []float32) ([]float32, float64, bool, bool, core.Info, error) {
	obs, rew, te, tr, info, err := r.fake.Step(a)
	return r.own(obs), rew, te, tr, info, err
}

func TestClipReward(t *testing.T) {
	rs := []float64{2.5, -0.1, 0, math.Inf(-1), 1e-9}
	f := newFake()
	f.reward = func(t int) float64 { return rs[t-1] }
	c := NewClipReward(f)
	c.Reset(0)
	var got []float64
	for range rs {
		_, r, _, _, _, _ := c.Step([]float32{0})
		got = append(got, r)
	}
	if !slices.Equal(got, []float64{1, -1, 0, -1, 1}) {
		t.Errorf("clipped %v", got)
	}
	f.reward = func(int) float64 { return math.NaN() }
	if _, r, _, _, _, _ := c.Step([]float32{0}); !math.IsNaN(r) {
		t.Errorf("sign(NaN) = %v, want NaN (np.sign)", r)
	}
}

// TestGrayScaleResize: the image wrappers' spaces and values (the pixel
// arithmetic itself is pinned to OpenCV in image_test.go).
func TestGrayScaleResize(t *testing.T) {
	f := &fake{h: 4, w: 6, c: 3, nActions: 2, obs: func(t, i int) float32 { return float32((i*37 + t) % 256) }}
	g, err := NewGrayScale(f)
	if err != nil {
		t.Fatal(err)
	}
	if b := g.ObservationSpace().(core.Box); !slices.Equal(b.Dims, []int{4, 6, 1}) || b.High[0] != 255 {
		t.Fatalf("gray space %v", b)
	}
	obs, _, _ := g.Reset(0)
	for i := range 24 {
		want := Gray(uint8(i*3*37%256), uint8((i*3+1)*37%256), uint8((i*3+2)*37%256))
		if obs[i] != float32(want) {
			t.Fatalf("pixel %d: %v, want %d", i, obs[i], want)
		}
	}
	r, err := NewResize(g, 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	if b := r.ObservationSpace().(core.Box); !slices.Equal(b.Dims, []int{2, 3, 1}) {
		t.Fatalf("resize space %v", b)
	}
	obs, _, _, _, _, _ = r.Step([]float32{0})
	gray, _, _, _, _, _ := (&fake{h: 4, w: 6, c: 3, obs: f.obs}).Step([]float32{0})
	for oy := range 2 { // 2×2 blocks of the gray image, rounded half up
		for ox := range 3 {
			s := 0
			for y := range 2 {
				for x := range 2 {
					p := ((2*oy+y)*6 + 2*ox + x) * 3
					s += int(Gray(uint8(gray[p]), uint8(gray[p+1]), uint8(gray[p+2])))
				}
			}
			if obs[oy*3+ox] != float32((s+2)/4) {
				t.Fatalf("resized (%d,%d) = %v, want %d", oy, ox, obs[oy*3+ox], (s+2)/4)
			}
		}
	}
	if _, err := NewGrayScale(newFake()); err == nil {
		t.Error("grayscale of 1 channel accepted")
	}
	if _, err := NewResize(newFake(), 2, 2); err == nil {
		t.Error("resize 1×1 to 2×2 accepted")
	}
}

// TestFrameStack: [H, W, C] → [H, W, K·C], oldest frame first, the reset
// frame in every slot.
func TestFrameStack(t *testing.T) {
	f := &fake{h: 1, w: 2, c: 2, nActions: 2, obs: func(t, i int) float32 { return float32(10*t + i) }}
	s, err := NewFrameStack(f, 3)
	if err != nil {
		t.Fatal(err)
	}
	if b := s.ObservationSpace().(core.Box); !slices.Equal(b.Dims, []int{1, 2, 6}) || len(b.Low) != 12 {
		t.Fatalf("space %v", b)
	}
	obs, _, _ := s.Reset(0)
	// Pixel 0 holds channels (0, 1) of each frame, pixel 1 channels (2, 3).
	if want := []float32{0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3}; !slices.Equal(obs, want) {
		t.Fatalf("reset %v, want %v", obs, want)
	}
	s.Step([]float32{0})
	obs, _, _, _, _, _ = s.Step([]float32{0})
	if want := []float32{0, 1, 10, 11, 20, 21, 2, 3, 12, 13, 22, 23}; !slices.Equal(obs, want) {
		t.Fatalf("step 2 %v, want %v", obs, want)
	}
	obs, _, _, _, _, _ = s.Step([]float32{0})
	if want := []float32{10, 11, 20, 21, 30, 31, 12, 13, 22, 23, 32, 33}; !slices.Equal(obs, want) {
		t.Fatalf("step 3 %v, want %v", obs, want)
	}
}

func TestSplitID(t *testing.T) {
	for _, c := range []struct {
		id, inner, ws string
		ok, bad       bool
	}{
		{id: "MinAtar/Breakout-v1", inner: "MinAtar/Breakout-v1"},
		{id: "grpc://host:5005/ALE/Pong-v5", inner: "grpc://host:5005/ALE/Pong-v5"},
		{id: "atari:grpc://host:5005/ALE/Pong-v5", inner: "grpc://host:5005/ALE/Pong-v5", ws: "atari", ok: true},
		{id: "max_and_skip,frame_stack=2,resize=42x40:X-v0", inner: "X-v0", ws: "max_and_skip=4,frame_stack=2,resize=42x40", ok: true},
		{id: "resize=64,noop_reset=7:X", inner: "X", ws: "resize=64x64,noop_reset=7", ok: true},
		{id: "frame_stack=0:X", ok: true, bad: true},
		{id: "clip_reward=1:X", ok: true, bad: true},
		{id: "resize=ax3:X", ok: true, bad: true},
		{id: "grayscale:", ok: true, bad: true},
		{id: "grayscale,bogus:X", inner: "grayscale,bogus:X"},
	} {
		ws, inner, ok, err := SplitID(c.id)
		if ok != c.ok || (err != nil) != c.bad {
			t.Errorf("%q: ok %v err %v", c.id, ok, err)
			continue
		}
		if c.bad {
			continue
		}
		var names []string
		for _, w := range ws {
			names = append(names, w.String())
		}
		if inner != c.inner || strings.Join(names, ",") != c.ws {
			t.Errorf("%q: %q over %q, want %q over %q", c.id, names, inner, c.ws, c.inner)
		}
	}
}

// TestAtariPreset composes CleanRL's stack over an Atari-shaped env: the
// reset's inner steps (no-ops, then FIRE and action 2, each four frames),
// the [84, 84, 4] observation and the clipped reward.
func TestAtariPreset(t *testing.T) {
	f := &fake{h: 210, w: 160, c: 3, nActions: 4, obs: func(t, i int) float32 { return float32((i + t) % 256) },
		reward: func(int) float64 { return 7 }, lives: func(int) int { return 5 },
		meanings: []string{"NOOP", "FIRE", "RIGHT", "LEFT"}}
	e, err := Apply(meaningful{f}, []Wrapper{{Name: Preset}})
	if err != nil {
		t.Fatal(err)
	}
	if b := e.ObservationSpace().(core.Box); !slices.Equal(b.Dims, []int{84, 84, 4}) {
		t.Fatalf("space %v", b.Dims)
	}
	if _, _, err := e.Reset(11); err != nil {
		t.Fatal(err)
	}
	k := 0
	for k+1 < len(f.log) && f.log[k+1] == "S0" {
		k++
	}
	want := []string{"R11"}
	for range k {
		want = append(want, "S0")
	}
	for _, a := range []string{"S1", "S2"} {
		for range 4 {
			want = append(want, a)
		}
	}
	if k < 1 || k > 30 || !slices.Equal(f.log, want) {
		t.Fatalf("reset log %v, want %v", f.log, want)
	}
	_, r, _, _, _, err := e.Step([]float32{3})
	if err != nil || r != 1 {
		t.Fatalf("reward %v err %v, want sign(4·7) = 1", r, err)
	}

	_, err = Apply(f, []Wrapper{{Name: Preset}})
	if err == nil || !strings.Contains(err.Error(), "fire_reset") {
		t.Errorf("preset without action meanings: %v", err)
	}
	f.meanings = []string{"NOOP", "UP", "DOWN"}
	e, _ = Apply(meaningful{f}, []Wrapper{{Name: Preset}})
	f.log = nil
	e.Reset(1)
	if slices.Contains(f.log, "S1") {
		t.Errorf("no FIRE, yet the reset steps %v", f.log)
	}
}

// BenchmarkAtariStack steps CleanRL's stack over a 210×160×3 env whose
// frames cost nothing (one still frame): the wrappers' own cost per agent
// step (4 frames, their max, gray, resize, stack).
func BenchmarkAtariStack(b *testing.B) {
	f := &fake{h: 210, w: 160, c: 3, nActions: 4, obs: func(t, i int) float32 { return float32((i + t) % 256) },
		lives: func(int) int { return 5 }, meanings: []string{"NOOP", "FIRE", "RIGHT", "LEFT"}, still: true}
	e, err := Apply(meaningful{f}, []Wrapper{{Name: Preset}})
	if err != nil {
		b.Fatal(err)
	}
	e.Reset(1)
	a := []float32{3}
	b.ReportAllocs()
	for b.Loop() {
		e.Step(a)
	}
}
