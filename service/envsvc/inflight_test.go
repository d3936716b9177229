package envsvc

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"herd/env"
	"herd/internal/rng"
)

// stepTrace steps v from seed with n·steps seeded random actions and
// returns every batch's values, bit for bit, as one slice of words.
func stepTrace(t *testing.T, v env.Vector, seed int64, steps int) []uint64 {
	t.Helper()
	n, d := v.NumEnvs(), v.ActionSpace().Dim()
	b, err := v.Reset(seed)
	if err != nil {
		t.Fatal(err)
	}
	var out []uint64
	obs := func(xs []float32) {
		for _, x := range xs {
			out = append(out, uint64(math.Float32bits(x)))
		}
	}
	obs(b.Obs)
	r := rng.New(uint64(seed), "test/inflight", 0)
	act := make([]float32, n*d)
	ended := 0
	for s := 0; s < steps; s++ {
		for i := 0; i < n; i++ {
			v.ActionSpace().SampleTo(act[i*d:(i+1)*d], r)
		}
		b, err := v.Step(act)
		if err != nil {
			t.Fatalf("step %d: %v", s, err)
		}
		obs(b.Obs)
		for i := 0; i < n; i++ {
			out = append(out, uint64(math.Float32bits(b.Rewards[i])))
			flags := uint64(0)
			if b.Terminated[i] {
				flags |= 1
			}
			if b.Truncated[i] {
				flags |= 2
			}
			out = append(out, flags)
			if b.Done(i) {
				ended++
				obs(b.FinalObs[i*b.ObsDim : (i+1)*b.ObsDim])
				out = append(out, math.Float64bits(b.Infos[i].Episode.Return), uint64(b.Infos[i].Episode.Length))
			}
		}
	}
	if ended == 0 {
		t.Fatalf("no episode ended in %d steps: the trace misses autoresets", steps)
	}
	return out
}

// sameSlice fails t at the first element where got differs from want.
func sameSlice[T comparable](t *testing.T, what string, want, got []T) {
	t.Helper()
	if len(want) != len(got) {
		t.Fatalf("%s: %d elements, want %d", what, len(got), len(want))
	}
	for i := range want {
		if want[i] != got[i] {
			t.Fatalf("%s: element %d is %v, want %v", what, i, got[i], want[i])
		}
	}
}

// TestInflightSameBits: a remote vector split over K sessions in flight
// steps exactly as the unpipelined one (K = 1), autoresets, final
// observations and episode statistics included, for K = 2, 3, 4 over 7
// envs (uneven sub-batches).
func TestInflightSameBits(t *testing.T) {
	addr, _ := startServer(t, nil, 0)
	trace := func(k int) []uint64 {
		v, err := envs().MakeVector(fmt.Sprintf("grpc://%s/CartPole-v1?inflight=%d", addr, k), 7, env.Sync,
			env.WithEpisodeStatistics(), env.WithMaxEpisodeSteps(40))
		if err != nil {
			t.Fatal(err)
		}
		defer v.Close()
		return stepTrace(t, v, 11, 150)
	}
	want := trace(1)
	for _, k := range []int{2, 3, 4} {
		sameSlice(t, fmt.Sprintf("inflight=%d", k), want, trace(k))
	}
}

func TestInflightErrors(t *testing.T) {
	addr, _ := startServer(t, nil, 0)
	for _, id := range []string{"grpc://" + addr + "/CartPole-v1?inflight=0", "grpc://" + addr + "/CartPole-v1?inflight=x",
		"grpc://" + addr + "/CartPole-v1?inflight=5"} {
		if _, err := envs().MakeVector(id, 4, env.Sync); !errors.Is(err, env.ErrInvalidOption) {
			t.Errorf("%s: err %v, want ErrInvalidOption", id, err)
		}
	}
	for _, id := range []string{"shm:///CartPole", "shm://a:1/CartPole", "shm://name/", "shm://name/CartPole?ca=x", "shm://name/CartPole?timeout=0s"} {
		if _, err := envs().Make(id); !errors.Is(err, env.ErrInvalidOption) {
			t.Errorf("%s: err %v, want ErrInvalidOption", id, err)
		}
	}
	// One env is one session: herd train makes single envs of the id its
	// vectors split (spaces, memory estimate), so Make takes inflight.
	if e, err := envs().Make("grpc://" + addr + "/CartPole-v1?inflight=2"); err != nil {
		t.Errorf("Make with inflight=2: %v", err)
	} else {
		if _, _, err := e.Reset(1); err != nil {
			t.Errorf("Make with inflight=2, reset: %v", err)
		}
		e.Close()
	}
	// A bad action is refused before any session steps.
	v := resetVector(t, "grpc://"+addr+"/CartPole-v1?inflight=2", 4, 1)
	if _, err := v.Step([]float32{0, 1, 0, 7}); !errors.Is(err, env.ErrInvalidAction) {
		t.Fatalf("bad action: err %v", err)
	}
	if _, err := v.Step([]float32{0, 1, 0, 1}); err != nil {
		t.Fatalf("step after a refused action: %v", err)
	}
}
