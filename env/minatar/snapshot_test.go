package minatar

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"herd/env/internal/core"
	"herd/env/minatar/internal/nprand"
)

// play steps e with actions from r for n steps, resetting (continuing the
// stream) after each episode, and returns every observation, reward and
// end.
func play(t *testing.T, e *Env, r *rand.Rand, n int) (obs [][]float32, rews []float64, ends []bool) {
	t.Helper()
	for range n {
		o, rew, term, _, _, err := e.Step([]float32{float32(r.IntN(e.actSpace.N))})
		if err != nil {
			t.Fatal(err)
		}
		obs, rews, ends = append(obs, slices.Clone(o)), append(rews, rew), append(ends, term)
		if term {
			o, _, err := e.Reset(core.NoSeed)
			if err != nil {
				t.Fatal(err)
			}
			obs = append(obs, slices.Clone(o))
		}
	}
	return obs, rews, ends
}

// TestSnapshotContinues: for every game, an env restored from a state
// saved mid-episode (after 1 to 400 random steps, so within a game's
// first episode, at its end and in later ones, with objects on the
// screen and the stream part-way through its words) goes on exactly as
// the env it was saved from: the same observations, rewards and episode
// ends for the next 1,500 steps, across resets that continue the stream.
// It fails if a field of a game, the random stream or the sticky action
// is left out of the state.
func TestSnapshotContinues(t *testing.T) {
	for _, game := range Games() {
		for _, at := range []int{1, 37, 400} {
			cfg := DefaultConfig(game)
			cfg.MinimalActionSet = at == 37
			a, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := a.Reset(int64(at)); err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(uint64(at), 9))
			play(t, a, r, at)
			b, err := a.MarshalState()
			if err != nil {
				t.Fatal(err)
			}
			// Restored into an env that has played other episodes.
			c, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := c.Reset(99); err != nil {
				t.Fatal(err)
			}
			play(t, c, rand.New(rand.NewPCG(5, 5)), 50)
			if err := c.UnmarshalState(b); err != nil {
				t.Fatalf("%s after %d steps: %v", game, at, err)
			}
			if c.DifficultyRamp() != a.DifficultyRamp() {
				t.Fatalf("%s after %d steps: ramp %d, want %d", game, at, c.DifficultyRamp(), a.DifficultyRamp())
			}
			seed := uint64(1000 + at)
			wo, wr, we := play(t, a, rand.New(rand.NewPCG(seed, 1)), 1500)
			go_, gr, ge := play(t, c, rand.New(rand.NewPCG(seed, 1)), 1500)
			if !slices.Equal(gr, wr) || !slices.Equal(ge, we) || len(go_) != len(wo) {
				t.Fatalf("%s after %d steps: the restored env's rewards or ends differ", game, at)
			}
			for i := range wo {
				if !slices.Equal(go_[i], wo[i]) {
					t.Fatalf("%s after %d steps: observation %d differs", game, at, i)
				}
			}
		}
	}
}

// TestSnapshotMalformed: a state cut short, with bytes after it, with a
// value outside what the game allows, or from a closed env is an error,
// and the env is left as it was.
func TestSnapshotMalformed(t *testing.T) {
	for _, game := range Games() {
		e, err := New(DefaultConfig(game))
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := e.Reset(3); err != nil {
			t.Fatal(err)
		}
		play(t, e, rand.New(rand.NewPCG(1, 2)), 30)
		b, err := e.MarshalState()
		if err != nil {
			t.Fatal(err)
		}
		for _, bad := range [][]byte{b[:len(b)-1], b[:100], append(slices.Clone(b), 0)} {
			if err := e.UnmarshalState(bad); err == nil {
				t.Errorf("%s: a state of %d bytes (of %d) loaded", game, len(bad), len(b))
			}
		}
		if now, err := e.MarshalState(); err != nil || !slices.Equal(now, b) {
			t.Errorf("%s: a state that failed to load changed the env (%v)", game, err)
		}
		// Each byte of the game's state set to 0xfe in turn (a value far
		// outside the grid, a flag that is neither 0 nor 1, or the fields
		// after it read out of step): an error, or a state the game plays
		// on from, never a panic.
		for i := nprand.StateLen; i < len(b); i++ {
			bad := slices.Clone(b)
			bad[i] = 0xfe
			if err := e.UnmarshalState(bad); err != nil {
				continue
			}
			for range 20 {
				if _, _, term, _, _, err := e.Step([]float32{0}); err != nil || term {
					if _, _, err := e.Reset(core.NoSeed); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		e.Close()
		if _, err := e.MarshalState(); !errors.Is(err, core.ErrClosed) {
			t.Errorf("%s: MarshalState after Close: %v", game, err)
		}
		if err := e.UnmarshalState(b); !errors.Is(err, core.ErrClosed) {
			t.Errorf("%s: UnmarshalState after Close: %v", game, err)
		}
	}
}
