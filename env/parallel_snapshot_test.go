package env_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"herd/env"
)

// TestFlatVectorSnapshot: a multi-agent vector of MPE envs restored from a
// snapshot taken mid-episode (into a vector reset elsewhere) steps exactly
// as the vector it was taken from, through episode ends and autoresets:
// the same observations, rewards, ends and per-agent episode statistics.
// simple_reference has goals and a communication channel, simple_tag
// landmarks, speed caps and continuous actions here.
func TestFlatVectorSnapshot(t *testing.T) {
	for _, id := range []string{"mpe/simple_reference_v3?max_cycles=10", "mpe/simple_tag_v3?continuous_actions=true&max_cycles=10"} {
		t.Run(id, func(t *testing.T) {
			mk := func() env.Vector {
				v, err := env.MakeVector(id, 8, env.Sync, env.WithEpisodeStatistics())
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { v.Close() })
				return v
			}
			r := rand.New(rand.NewPCG(1, 2))
			act := func(v env.Vector) []float32 {
				sp := v.ActionSpace()
				a := make([]float32, v.NumEnvs()*sp.Dim())
				for i := range a {
					if d, ok := sp.(env.Discrete); ok {
						a[i] = float32(r.IntN(d.N))
					} else {
						a[i] = r.Float32()
					}
				}
				return a
			}
			a, b := mk(), mk()
			if _, err := a.Reset(3); err != nil {
				t.Fatal(err)
			}
			if _, err := b.Reset(9); err != nil {
				t.Fatal(err)
			}
			for range 13 {
				if _, err := a.Step(act(a)); err != nil {
					t.Fatal(err)
				}
			}
			state, err := env.MarshalVector(a)
			if err != nil {
				t.Fatal(err)
			}
			if err := env.UnmarshalVector(b, func(i int) ([]byte, error) { return state[i], nil }); err != nil {
				t.Fatal(err)
			}
			bits := func(bt *env.Batch) []uint64 {
				var out []uint64
				for _, x := range bt.Obs {
					out = append(out, uint64(math.Float32bits(x)))
				}
				for i := range bt.Rewards {
					out = append(out, uint64(math.Float32bits(bt.Rewards[i])), uint64(boolBit(bt.Terminated[i])<<1|boolBit(bt.Truncated[i])))
					if bt.Infos[i].HasEpisode {
						out = append(out, math.Float64bits(bt.Infos[i].Episode.Return), uint64(bt.Infos[i].Episode.Length))
					}
				}
				return out
			}
			episodes := 0
			for s := range 30 {
				acts := act(a)
				ba, err := a.Step(acts)
				if err != nil {
					t.Fatal(err)
				}
				wa := bits(ba)
				bb, err := b.Step(acts)
				if err != nil {
					t.Fatal(err)
				}
				if wb := bits(bb); len(wa) != len(wb) {
					t.Fatalf("step %d after the snapshot: %d values, the original %d", s, len(wb), len(wa))
				} else {
					for i := range wa {
						if wa[i] != wb[i] {
							t.Fatalf("step %d after the snapshot: value %d differs", s, i)
						}
					}
				}
				for _, in := range ba.Infos {
					if in.HasEpisode {
						episodes++
					}
				}
			}
			if episodes == 0 {
				t.Fatal("no episode ended: the test does not reach an autoreset")
			}
		})
	}
}

func boolBit(v bool) uint64 {
	if v {
		return 1
	}
	return 0
}
