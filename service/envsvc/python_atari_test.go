package envsvc

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"

	"herd/env"
	"herd/env/remote"
	"herd/internal/pyproc"
)

// TestPythonAtariUint8 serves an ALE-shaped Python env (uint8 210×160×3
// frames, lives, action meanings; python/tests/pyatari.py): over gRPC the
// frames travel one byte a value and arrive as the server made them, lives
// and action meanings come through, and the atari wrapper preset runs on
// it (FIRE reset, [84, 84, 4] frames). Shared memory carries them alike:
// the segment holds the steps' frames one byte a value and the envs'
// lives.
func TestPythonAtariUint8(t *testing.T) {
	const dim = 210 * 160 * 3
	args := []string{"--env", "pyatari:Atari"}
	shm := ""
	if runtime.GOOS == "linux" {
		shm = fmt.Sprintf("herdtest-%d-atari", os.Getpid())
		args = append(args, "--shm", shm)
	}
	p := pyproc.Start(t, "herd_env.serve", args...)
	frame := func(obs []float32, step, a int) error {
		for i, v := range obs {
			if want := float32((i + 7*step + a) % 256); v != want {
				return fmt.Errorf("step %d value %d: %v, want %v", step, i, v, want)
			}
		}
		return nil
	}
	check := func(t *testing.T, id string) {
		e, err := envs().Make(id, env.WithoutTimeLimit())
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		r := e.(*remote.Env)
		if b := e.ObservationSpace().(env.Box); !slices.Equal(b.Dims, []int{210, 160, 3}) {
			t.Fatalf("space %v", b.Dims)
		}
		if m := r.ActionMeanings(); !slices.Equal(m, []string{"NOOP", "FIRE", "RIGHT", "LEFT"}) {
			t.Fatalf("action meanings %v", m)
		}
		obs, info, err := e.Reset(1)
		if err != nil {
			t.Fatal(err)
		}
		if err := frame(obs, 0, 0); err != nil {
			t.Fatal(err)
		}
		if !info.HasLives || info.Lives != 3 {
			t.Fatalf("reset info %+v, want 3 lives", info)
		}
		if got := r.ObsBytes(); got != dim {
			t.Fatalf("reset: %d observation bytes, want %d (one a value)", got, dim)
		}
		for step := 1; step <= 5; step++ {
			obs, rew, term, _, info, err := e.Step([]float32{2})
			if err != nil {
				t.Fatal(err)
			}
			if err := frame(obs, step, 2); err != nil {
				t.Fatal(err)
			}
			if want := 3 - step/5; rew != 1.5 || term || !info.HasLives || info.Lives != want {
				t.Fatalf("step %d: reward %v term %v info %+v, want lives %d", step, rew, term, info, want)
			}
		}
		if got, want := r.ObsBytes(), int64(6*dim); got != want {
			t.Fatalf("%d observation bytes, want %d", got, want)
		}
	}
	ids := []string{"grpc://" + p.Addr() + "/Atari?timeout=20s"}
	if shm != "" {
		ids = append(ids, "shm://"+shm+"/Atari?timeout=20s")
	}
	for _, id := range ids {
		t.Run(id[:strings.Index(id, ":")], func(t *testing.T) {
			check(t, id)
			checkAtariVector(t, id, frame)
			checkAtariPreset(t, "atari:"+id)
		})
	}
}

// checkAtariVector steps two served pyatari envs through an episode's end.
func checkAtariVector(t *testing.T, id string, frame func(obs []float32, step, a int) error) {
	const dim = 210 * 160 * 3
	v, err := envs().MakeVector(id, 2, env.Sync)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if _, err := v.Reset(1); err != nil {
		t.Fatal(err)
	}
	// The game ends at step 15: the server resets it in the same step, and
	// the last frame comes back as the final observation; the step's lives
	// are the ended game's (0), the next step's the new game's.
	steps := func() error {
		for step := 1; step <= 16; step++ {
			b, err := v.Step([]float32{0, 1})
			if err != nil {
				return err
			}
			for i := range 2 {
				ft, a := step%15, i
				if ft == 0 {
					a = 0 // the new episode's first frame
				}
				if err := frame(b.ObsRow(i), ft, a); err != nil {
					return fmt.Errorf("vector env %d: %w", i, err)
				}
				if in := b.Infos[i]; !in.HasLives || in.Lives != 3-(step-15*(step/16))/5 || b.Terminated[i] != (step == 15) {
					return fmt.Errorf("vector env %d step %d: info %+v, terminated %v", i, step, in, b.Terminated[i])
				}
				if step == 15 {
					if err := frame(b.FinalObsRow(i), 15, i); err != nil {
						return fmt.Errorf("vector env %d final observation: %w", i, err)
					}
				}
			}
		}
		return nil
	}
	if err := steps(); err != nil {
		t.Fatal(err)
	}
	if got, want := v.(*remote.Vector).ObsBytes(), int64(17*2*dim+2*dim); got != want {
		t.Fatalf("vector: %d observation bytes, want %d", got, want)
	}
}

// checkAtariPreset runs the atari wrapper preset on a served pyatari env:
// episodic_life needs the lives the server sends.
func checkAtariPreset(t *testing.T, id string) {
	w, err := envs().Make(id)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if b := w.ObservationSpace().(env.Box); !slices.Equal(b.Dims, []int{84, 84, 4}) {
		t.Fatalf("wrapped space %v", b.Dims)
	}
	if _, _, err := w.Reset(3); err != nil {
		t.Fatal(err)
	}
	ends := 0
	for range 12 {
		_, r, term, _, _, err := w.Step([]float32{3})
		if err != nil {
			t.Fatal(err)
		}
		if r != 1 {
			t.Fatalf("clipped reward %v, want 1", r)
		}
		if term {
			ends++
			if _, _, err := w.Reset(4); err != nil {
				t.Fatal(err)
			}
		}
	}
	if ends == 0 {
		t.Fatal("no life lost in 12 wrapped steps (48 frames, a life every 5)")
	}
}
