package env_test

import (
	"errors"
	"reflect"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"herd/env"
)

func makeVec(t testing.TB, id string, n int, mode env.VectorMode, opts ...env.Option) env.Vector {
	t.Helper()
	v, err := env.MakeVector(id, n, mode, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestVectorMatchesSingleEnvs drives a vector and N independent envs with
// the same actions and checks every field of every batch, including the
// final observations and the autoreset.
func TestVectorMatchesSingleEnvs(t *testing.T) {
	for _, mode := range []env.VectorMode{env.Sync, env.Async} {
		for _, id := range []string{"CartPole-v1", "Pendulum-v1", "Acrobot-v1", "LunarLanderContinuous-v3"} {
			const n, seed = 5, 11
			v := makeVec(t, id, n, mode, env.WithMaxEpisodeSteps(30), env.WithEpisodeStatistics())
			singles := make([]env.Env, n)
			for i := range singles {
				singles[i], _ = env.Make(id, env.WithMaxEpisodeSteps(30), env.WithEpisodeStatistics())
			}
			b, err := v.Reset(seed)
			if err != nil {
				t.Fatal(err)
			}
			for i, e := range singles {
				obs, _, _ := e.Reset(env.VectorSeed(seed, i))
				if !equal32(obs, b.ObsRow(i)) {
					t.Fatalf("%v %s reset row %d: %v, single env %v", mode, id, i, b.ObsRow(i), obs)
				}
			}
			r := testRand("vec")
			acts := make([]float32, n*v.ActionSpace().Dim())
			ends := 0
			for step := 0; step < 200; step++ {
				ad := v.ActionSpace().Dim()
				for i := 0; i < n; i++ {
					v.ActionSpace().SampleTo(acts[i*ad:(i+1)*ad], r)
				}
				b, err = v.Step(acts)
				if err != nil {
					t.Fatal(err)
				}
				for i, e := range singles {
					obs, rew, term, trunc, info, err := e.Step(acts[i*ad : (i+1)*ad])
					if err != nil {
						t.Fatal(err)
					}
					if b.Rewards[i] != float32(rew) || b.Terminated[i] != term || b.Truncated[i] != trunc || !reflect.DeepEqual(b.Infos[i], info) {
						t.Fatalf("%v %s step %d env %d: batch (%v %v %v %+v), single (%v %v %v %+v)", mode, id, step, i,
							b.Rewards[i], b.Terminated[i], b.Truncated[i], b.Infos[i], rew, term, trunc, info)
					}
					if term || trunc {
						ends++
						if !equal32(b.FinalObsRow(i), obs) || !equal32(b.NextObsRow(i), obs) {
							t.Fatalf("%v %s: final obs %v, single env's last obs %v", mode, id, b.FinalObsRow(i), obs)
						}
						obs, _, _ = e.Reset(env.NoSeed)
					}
					if !equal32(b.ObsRow(i), obs) {
						t.Fatalf("%v %s step %d env %d: obs %v, single %v", mode, id, step, i, b.ObsRow(i), obs)
					}
				}
			}
			if ends < n {
				t.Fatalf("%v %s: only %d episodes ended in 200 steps of 30-step episodes", mode, id, ends)
			}
			v.Close()
		}
	}
}

func TestVectorErrors(t *testing.T) {
	for _, mode := range []env.VectorMode{env.Sync, env.Async} {
		v := makeVec(t, "CartPole-v1", 3, mode)
		v.Reset(1)
		if _, err := v.Step([]float32{0, 1}); !errors.Is(err, env.ErrInvalidAction) {
			t.Fatalf("%v: 2 actions for 3 envs: %v", mode, err)
		}
		if _, err := v.Step([]float32{0, 1, 2}); !errors.Is(err, env.ErrInvalidAction) || !strings.Contains(err.Error(), "vector slot 2: ") {
			t.Fatalf("%v: action 2 for Discrete(2): %v", mode, err)
		}
		if _, err := v.Step([]float32{0, 0.5, 1}); !errors.Is(err, env.ErrInvalidAction) || !strings.Contains(err.Error(), "vector slot 1: ") {
			t.Fatalf("%v: action 0.5 for Discrete(2): %v", mode, err)
		}
		b, err := v.Step([]float32{0, 1, 1})
		if err != nil {
			t.Fatal(err)
		}
		// The rejected steps must not have advanced any env: a fresh vector
		// taking only the valid step agrees exactly.
		fresh := makeVec(t, "CartPole-v1", 3, mode)
		fresh.Reset(1)
		fb, _ := fresh.Step([]float32{0, 1, 1})
		if !equal32(b.Obs, fb.Obs) {
			t.Fatalf("%v: rejected actions moved envs: %v, want %v", mode, b.Obs, fb.Obs)
		}
		fresh.Close()
		v.Close()
		if _, err := v.Step([]float32{0, 1, 1}); !errors.Is(err, env.ErrClosed) {
			t.Fatalf("%v: Step after Close: %v", mode, err)
		}
		if err := v.Close(); err != nil {
			t.Fatalf("%v: second Close: %v", mode, err)
		}
	}
	if _, err := env.MakeVector("Nope-v0", 2, env.Sync); !errors.Is(err, env.ErrUnknownID) {
		t.Fatalf("unknown id: %v", err)
	}
	if _, err := env.MakeVector("CartPole-v1", 0, env.Async); !errors.Is(err, env.ErrInvalidOption) {
		t.Fatalf("0 envs: %v", err)
	}
	mixed := func(i int) (env.Env, error) {
		if i == 1 {
			return env.Make("Acrobot-v1")
		}
		return env.Make("CartPole-v1")
	}
	if _, err := env.NewSyncVector(2, mixed); !errors.Is(err, env.ErrInvalidOption) {
		t.Fatalf("mixed spaces: %v", err)
	}
}

// TestAsyncVectorCloseStopsWorkers checks that Close waits for its
// goroutines. It counts the twin workers' goroutines by their stacks, not
// all goroutines, which other tests running beside it start and end.
func TestAsyncVectorCloseStopsWorkers(t *testing.T) {
	base := twinWorkers()
	v, err := env.NewAsyncVector(8, func(int) (env.Env, error) { return env.Make("CartPole-v1") }, env.AsyncOptions{Workers: 4})
	if err != nil {
		t.Fatal(err)
	}
	if w := v.Workers(); w != 4 {
		t.Fatalf("%d workers, want 4", w)
	}
	// A goroutine just started shows its loop once it has been scheduled.
	deadline := time.Now().Add(2 * time.Second)
	for twinWorkers() < base+3 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := twinWorkers(); n < base+3 {
		t.Fatalf("%d worker goroutines with 3 running, %d before", n, base)
	}
	v.Close()
	deadline = time.Now().Add(2 * time.Second)
	for twinWorkers() > base && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := twinWorkers(); n > base {
		t.Fatalf("%d worker goroutines after Close, %d before", n, base)
	}
}

// twinWorkers counts the goroutines running a twin worker's loop.
func twinWorkers() int {
	var b strings.Builder
	pprof.Lookup("goroutine").WriteTo(&b, 2)
	return strings.Count(b.String(), "herd/internal/twin.(*Pair).loop(")
}

func TestVectorStepAllocs(t *testing.T) {
	for _, mode := range []env.VectorMode{env.Sync, env.Async} {
		v := makeVec(t, "CartPole-v1", 8, mode, env.WithEpisodeStatistics())
		v.Reset(0)
		acts := make([]float32, 8)
		for i := range acts {
			acts[i] = float32(i % 2)
		}
		allocs := testing.AllocsPerRun(500, func() {
			if _, err := v.Step(acts); err != nil {
				t.Fatal(err)
			}
		})
		v.Close()
		if allocs != 0 {
			t.Errorf("%v: %v allocations per vector step", mode, allocs)
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

// failing is CartPole whose Step fails from step failAt on.
type failing struct {
	env.Env
	n, failAt int
}

var errBoom = errors.New("boom")

func (f *failing) Step(a []float32) ([]float32, float64, bool, bool, env.Info, error) {
	f.n++
	if f.n >= f.failAt {
		return nil, 0, false, false, env.Info{}, errBoom
	}
	return f.Env.Step(a)
}

// TestVectorEnvErrorIsDeterministic: when envs in several blocks fail in the
// same step, both vectors report the lowest slot.
func TestVectorEnvErrorIsDeterministic(t *testing.T) {
	factory := func(slot int) (env.Env, error) {
		e, err := env.Make("CartPole-v1", env.WithoutTimeLimit())
		if slot == 2 || slot == 6 {
			return &failing{Env: e, failAt: 3}, err
		}
		return e, err
	}
	sv, _ := env.NewSyncVector(8, factory)
	av, _ := env.NewAsyncVector(8, factory, env.AsyncOptions{Workers: 4})
	defer sv.Close()
	defer av.Close()
	for _, v := range []env.Vector{sv, av} {
		v.Reset(0)
		acts := make([]float32, 8)
		var err error
		for i := 0; i < 3 && err == nil; i++ {
			_, err = v.Step(acts)
		}
		if !errors.Is(err, errBoom) || !strings.Contains(err.Error(), "slot 2") {
			t.Fatalf("%T: error %v, want boom from slot 2", v, err)
		}
	}
}

// sleepy is CartPole whose Step also waits 2 ms, like an env bound by I/O
// or by a simulator in another process: it needs no CPU, so the test below
// measures overlap even on a loaded machine.
type sleepy struct{ env.Env }

func (s sleepy) Step(a []float32) ([]float32, float64, bool, bool, env.Info, error) {
	time.Sleep(2 * time.Millisecond)
	return s.Env.Step(a)
}

// TestAsyncVectorOverlapsEnvs: 8 envs on 4 workers take about a quarter of
// the sequential time per step.
func TestAsyncVectorOverlapsEnvs(t *testing.T) {
	factory := func(int) (env.Env, error) {
		e, err := env.Make("CartPole-v1")
		return sleepy{e}, err
	}
	timeSteps := func(v env.Vector) time.Duration {
		defer v.Close()
		v.Reset(0)
		acts := make([]float32, 8)
		start := time.Now()
		for i := 0; i < 10; i++ {
			if _, err := v.Step(acts); err != nil {
				t.Fatal(err)
			}
		}
		return time.Since(start)
	}
	sv, _ := env.NewSyncVector(8, factory)
	av, _ := env.NewAsyncVector(8, factory, env.AsyncOptions{Workers: 4})
	seq, par := timeSteps(sv), timeSteps(av)
	if seq < 160*time.Millisecond {
		t.Fatalf("sequential: %v for 80 sleeps of 2 ms", seq)
	}
	if par > seq*6/10 {
		t.Fatalf("4 workers: %v, sequential %v; want < 60%%", par, seq)
	}
	t.Logf("10 steps of 8 envs sleeping 2 ms: sync %v, async with 4 workers %v", seq, par)
}

// BenchmarkCheckActions: the up-front check of a vector step's actions,
// 256 Discrete(2) actions and 256 two-value Box actions.
func BenchmarkCheckActions(b *testing.B) {
	for _, c := range []struct {
		name  string
		space env.Space
	}{{"discrete", env.Discrete{N: 2}}, {"box", env.UniformBox(-1, 1, 2)}} {
		b.Run(c.name, func(b *testing.B) {
			const n = 256
			acts := make([]float32, n*c.space.Dim())
			for i := range acts {
				acts[i] = float32(i % 2)
			}
			for b.Loop() {
				if err := env.CheckActions(c.space, n, acts); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
