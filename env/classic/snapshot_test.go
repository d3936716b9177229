package classic

import (
	"math"
	"math/rand/v2"
	"testing"

	"herd/env/internal/core"
)

type snapEnv interface {
	core.Env
	core.Snapshotter
}

// TestSnapshotContinuesBitForBit: an env restored from a snapshot taken
// mid-episode steps (and resets, drawing from its random stream) exactly as
// the env it was taken from.
func TestSnapshotContinuesBitForBit(t *testing.T) {
	acro, err := NewAcrobot(AcrobotConfig{})
	if err != nil {
		t.Fatal(err)
	}
	acro2, _ := NewAcrobot(AcrobotConfig{})
	cases := []struct {
		name   string
		a, b   snapEnv
		action func(r *rand.Rand) []float32
	}{
		{"CartPole", NewCartPole(CartPoleConfig{}), NewCartPole(CartPoleConfig{}), func(r *rand.Rand) []float32 { return []float32{float32(r.IntN(2))} }},
		{"Acrobot", acro, acro2, func(r *rand.Rand) []float32 { return []float32{float32(r.IntN(3))} }},
		{"Pendulum", NewPendulum(PendulumConfig{}), NewPendulum(PendulumConfig{}), func(r *rand.Rand) []float32 { return []float32{float32(4*r.Float64() - 2)} }},
		{"MountainCar", NewMountainCar(MountainCarConfig{}), NewMountainCar(MountainCarConfig{}), func(r *rand.Rand) []float32 { return []float32{float32(r.IntN(3))} }},
		{"MountainCarContinuous", NewMountainCarContinuous(MountainCarConfig{}), NewMountainCarContinuous(MountainCarConfig{}), func(r *rand.Rand) []float32 { return []float32{float32(2*r.Float64() - 1)} }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// run steps e for n steps, resetting (without reseeding) when an
			// episode ends or every 40 steps, and returns every observation
			// and reward as bits.
			run := func(e snapEnv, r *rand.Rand, n int) []uint64 {
				var out []uint64
				for i := range n {
					obs, rew, term, trunc, _, err := e.Step(c.action(r))
					if err != nil {
						t.Fatal(err)
					}
					out = append(out, math.Float64bits(rew))
					if term || trunc || i%40 == 39 {
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
			if _, _, err := c.a.Reset(7); err != nil {
				t.Fatal(err)
			}
			run(c.a, rand.New(rand.NewPCG(1, 1)), 57)
			snap, err := c.a.MarshalState()
			if err != nil {
				t.Fatal(err)
			}
			want := run(c.a, rand.New(rand.NewPCG(2, 2)), 200)
			if err := c.b.UnmarshalState(snap); err != nil {
				t.Fatal(err)
			}
			got := run(c.b, rand.New(rand.NewPCG(2, 2)), 200)
			if len(got) != len(want) {
				t.Fatalf("%d values, want %d", len(got), len(want))
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("value %d differs after restore", i)
				}
			}
			if err := c.b.UnmarshalState(snap[:len(snap)-3]); err == nil {
				t.Error("a truncated snapshot was accepted")
			}
			if err := c.b.UnmarshalState(nil); err == nil {
				t.Error("an empty snapshot was accepted")
			}
		})
	}
}

// TestSnapshotBeforeReset: a fresh env (never reset, never seeded) restored
// into another one leaves it needing Reset, as the original.
func TestSnapshotBeforeReset(t *testing.T) {
	a, b := NewCartPole(CartPoleConfig{}), NewCartPole(CartPoleConfig{})
	if _, _, err := b.Reset(3); err != nil {
		t.Fatal(err)
	}
	snap, err := a.MarshalState()
	if err != nil {
		t.Fatal(err)
	}
	if err := b.UnmarshalState(snap); err != nil {
		t.Fatal(err)
	}
	if _, _, _, _, _, err := b.Step([]float32{0}); err == nil {
		t.Fatal("Step after restoring a never-reset env's state did not ask for Reset")
	}
}
