package env

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestMakeWrapped: a wrapper list in the id wraps the env Make gives for
// the rest, statistics inside the wrappers (the game's return).
func TestMakeWrapped(t *testing.T) {
	e, err := Make("max_and_skip=2,clip_reward,frame_stack=3:MinAtar/Breakout-v1", WithEpisodeStatistics())
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if b := e.ObservationSpace().(Box); !slices.Equal(b.Dims, []int{10, 10, 12}) {
		t.Fatalf("shape %v, want [10 10 12]", b.Dims)
	}
	var names []string
	for w := Env(e); ; {
		names = append(names, strings.TrimPrefix(strings.TrimPrefix(typeName(w), "*atari."), "*env."))
		u, ok := w.(Wrapper)
		if !ok {
			break
		}
		w = u.Unwrap()
	}
	if want := []string{"FrameStack", "ClipReward", "MaxAndSkip", "RecordEpisodeStatistics", "*minatar.Env"}; !slices.Equal(names, want) {
		t.Fatalf("wrappers %v, want %v", names, want)
	}
	if _, _, err := e.Reset(1); err != nil {
		t.Fatal(err)
	}
	steps, sawEpisode := 0, false
	for range 2000 {
		_, r, term, trunc, info, err := e.Step([]float32{float32(steps % 3)})
		if err != nil {
			t.Fatal(err)
		}
		if r != 0 && r != 1 {
			t.Fatalf("clipped reward %v", r)
		}
		steps++
		if term || trunc {
			if !info.HasEpisode || info.Episode.Length < steps {
				t.Fatalf("episode of %d steps: stats %+v, want the inner length (frames ≥ steps)", steps, info.Episode)
			}
			sawEpisode = true
			break
		}
	}
	if !sawEpisode {
		t.Fatal("no episode ended")
	}

	v, err := MakeVector("frame_stack=2:MinAtar/Breakout-v1", 3, Sync)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if b := v.ObservationSpace().(Box); !slices.Equal(b.Dims, []int{10, 10, 8}) || v.NumEnvs() != 3 {
		t.Fatalf("vector %v × %d", b.Dims, v.NumEnvs())
	}
}

func TestMakeWrappedErrors(t *testing.T) {
	for id, want := range map[string]string{
		"atari:MinAtar/Breakout-v1":         "fire_reset",
		"grayscale:MinAtar/Breakout-v1":     "RGB",
		"resize=20:MinAtar/Breakout-v1":     "shrinking",
		"episodic_life:MinAtar/Pong-v0":     "unknown",
		"frame_stack=0:MinAtar/Breakout-v1": "positive",
		"frame_stack:mpe/simple_spread_v3":  "multi-agent",
	} {
		e, err := Make(id)
		if err == nil {
			e.Close()
			t.Errorf("%s: accepted", id)
			continue
		}
		if !strings.Contains(err.Error(), want) || !(errors.Is(err, ErrInvalidOption) || errors.Is(err, ErrUnknownID)) {
			t.Errorf("%s: %v, want an error naming %q", id, err, want)
		}
	}
	if _, err := MakeVector("frame_stack=0:MinAtar/Breakout-v1", 2, Sync); err == nil {
		t.Error("MakeVector accepted frame_stack=0")
	}
}

func typeName(v any) string { return fmt.Sprintf("%T", v) }
