package minatar

import (
	"errors"
	"slices"
	"testing"

	"herd/env/internal/core"
)

func TestNewRejectsBadConfig(t *testing.T) {
	for _, cfg := range []Config{
		{Game: "pong", StickyActionProb: 0.1},
		{Game: "breakout", StickyActionProb: -0.1},
		{Game: "breakout", StickyActionProb: 1.01},
	} {
		if _, err := New(cfg); !errors.Is(err, core.ErrInvalidOption) {
			t.Errorf("New(%+v): %v, want ErrInvalidOption", cfg, err)
		}
	}
}

func TestEpisodeProtocol(t *testing.T) {
	e, err := New(DefaultConfig("breakout"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, _, _, err := e.Step([]float32{0}); !errors.Is(err, core.ErrNeedsReset) {
		t.Fatalf("Step before Reset: %v, want ErrNeedsReset", err)
	}
	if _, _, err := e.Reset(1); err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][]float32{{6}, {-1}, {0.5}, {}, {1, 2}} {
		if _, _, _, _, _, err := e.Step(bad); !errors.Is(err, core.ErrInvalidAction) {
			t.Fatalf("Step(%v): %v, want ErrInvalidAction", bad, err)
		}
	}
	// The no-op never moves the paddle, so the ball is lost within a few
	// dozen frames.
	for i := 0; ; i++ {
		_, _, term, trunc, _, err := e.Step([]float32{0})
		if err != nil || trunc {
			t.Fatalf("step %d: %v truncated=%v", i, err, trunc)
		}
		if term {
			break
		}
		if i > 1000 {
			t.Fatal("Breakout with no-ops did not end")
		}
	}
	if _, _, _, _, _, err := e.Step([]float32{0}); !errors.Is(err, core.ErrNeedsReset) {
		t.Fatalf("Step after the end: %v, want ErrNeedsReset", err)
	}
	e.Close()
	if _, _, err := e.Reset(1); !errors.Is(err, core.ErrClosed) {
		t.Fatalf("Reset after Close: %v, want ErrClosed", err)
	}
}

// episode plays fixed actions from Reset(seed) and returns every
// observation, reward and terminal flag, flattened.
func episode(t *testing.T, game string, seed int64, steps int) []float32 {
	t.Helper()
	e, err := New(DefaultConfig(game))
	if err != nil {
		t.Fatal(err)
	}
	obs, _, err := e.Reset(seed)
	if err != nil {
		t.Fatal(err)
	}
	out := slices.Clone(obs)
	n := e.ActionSpace().(core.Discrete).N
	for i := range steps {
		obs, r, term, _, _, err := e.Step([]float32{float32(i * 7 % n)})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, obs...)
		out = append(out, float32(r))
		if term {
			if obs, _, err = e.Reset(core.NoSeed); err != nil {
				t.Fatal(err)
			}
			out = append(out, -1)
			out = append(out, obs...)
		}
	}
	return out
}

// TestSeeds: the same seed replays the same episodes; a seed of 2³² or
// more (beyond NumPy's integer seeds) is its own stream, not its low 32
// bits; an env never seeded plays as seed 0.
func TestSeeds(t *testing.T) {
	const steps = 300
	for _, game := range Games() {
		a, b := episode(t, game, 1<<32+5, steps), episode(t, game, 1<<32+5, steps)
		if !slices.Equal(a, b) {
			t.Errorf("%s: seed 2³²+5 is not reproducible", game)
		}
		if slices.Equal(a, episode(t, game, 5, steps)) {
			t.Errorf("%s: seed 2³²+5 plays as seed 5", game)
		}
		if !slices.Equal(episode(t, game, core.NoSeed, steps), episode(t, game, 0, steps)) {
			t.Errorf("%s: an unseeded env differs from seed 0", game)
		}
	}
}
