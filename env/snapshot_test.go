package env

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

// TestChainContinuesBitForBit: CartPole with TimeLimit and episode
// statistics (episodes cut at 9 steps), saved mid-episode and restored into a fresh env from Make,
// steps exactly as the original: observations, rewards, truncations at the
// same step, and the same episode returns.
func TestChainContinuesBitForBit(t *testing.T) {
	mk := func() Env {
		e, err := Make("CartPole-v1", WithEpisodeStatistics(), WithMaxEpisodeSteps(9), WithStrictActions())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		return e
	}
	run := func(e Env, r *rand.Rand, n int) []uint64 {
		var out []uint64
		for range n {
			obs, rew, term, trunc, info, err := e.Step([]float32{float32(r.IntN(2))})
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, math.Float64bits(rew), uint64(boolByte(term)), uint64(boolByte(trunc)))
			if info.HasEpisode {
				out = append(out, math.Float64bits(info.Episode.Return), uint64(info.Episode.Length))
			}
			if term || trunc {
				if obs, _, err = e.Reset(-1); err != nil {
					t.Fatal(err)
				}
			}
			for _, v := range obs {
				out = append(out, uint64(math.Float32bits(v)))
			}
		}
		return out
	}
	a := mk()
	if _, _, err := a.Reset(11); err != nil {
		t.Fatal(err)
	}
	run(a, rand.New(rand.NewPCG(1, 0)), 31)
	snap, err := MarshalChain(a)
	if err != nil {
		t.Fatal(err)
	}
	want := run(a, rand.New(rand.NewPCG(3, 0)), 400)
	b := mk()
	if err := UnmarshalChain(b, snap); err != nil {
		t.Fatal(err)
	}
	got := run(b, rand.New(rand.NewPCG(3, 0)), 400)
	if len(got) != len(want) {
		t.Fatalf("%d values, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("value %d of %d differs after restore", i, len(want))
		}
	}
	for _, n := range []int{0, 5, 20} {
		if err := UnmarshalChain(mk(), snap[:n]); err == nil {
			t.Errorf("a state cut to %d bytes was accepted", n)
		}
	}
}

type opaqueEnv struct{ Env }

func TestChainRefusesOpaqueEnv(t *testing.T) {
	inner, err := Make("CartPole-v1")
	if err != nil {
		t.Fatal(err)
	}
	defer inner.Close()
	e, err := NewTimeLimit(opaqueEnv{Unwrapped(inner)}, 10)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := MarshalChain(e); !errors.Is(err, ErrNoSnapshot) {
		t.Fatalf("MarshalChain: %v", err)
	}
	if err := UnmarshalChain(e, make([]byte, 64)); !errors.Is(err, ErrNoSnapshot) {
		t.Fatalf("UnmarshalChain: %v", err)
	}
}
