package replay

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// stateful is a buffer whose state can be saved and restored.
type stateful interface {
	Buffer
	MarshalBinary() ([]byte, error)
	UnmarshalBinary([]byte) error
}

// TestStateContinuesBitForBit: a buffer restored from MarshalBinary into a
// fresh one with the same Config, then driven by the same operations and
// random stream as the original, draws the same transitions with the same
// weights and ends in the same state — before the buffer is full and after
// it wrapped, with enough priority writes that the sum tree has drifted
// (inner sums rounded by delta propagation, which a rebuild from the
// leaves would not reproduce) and once been rebuilt.
func TestStateContinuesBitForBit(t *testing.T) {
	cfg := Config{Capacity: 50, ObsSize: 3, ActSize: 2, RebuildEvery: 400}
	for _, kind := range []string{"uniform", "prioritized", "prioritized-global"} {
		for _, adds := range []int{7, 180} { // partly filled; wrapped several times
			t.Run(fmt.Sprintf("%s/adds=%d", kind, adds), func(t *testing.T) {
				mk := func() stateful {
					c := cfg
					if kind == "prioritized-global" {
						c.Locking = GlobalLock
					}
					var b stateful
					var err error
					if kind == "uniform" {
						b, err = NewUniform(c)
					} else {
						b, err = NewPrioritized(c)
					}
					if err != nil {
						t.Fatal(err)
					}
					return b
				}
				var s Sample
				// step adds a batch, samples, and feeds new priorities back.
				step := func(b stateful, r *rand.Rand, k int) []float32 {
					if err := b.Add(makeBatch(3, 3, 2, 3*k)); err != nil {
						t.Fatal(err)
					}
					if err := b.Sample(&s, min(4, b.Len()), r); err != nil {
						t.Fatal(err)
					}
					if p, ok := b.(*Prioritized); ok {
						pr := make([]float64, s.Len())
						for i := range pr {
							pr[i] = math.Pow(10, 24*r.Float64()-12) // many magnitudes: inner sums round
						}
						if _, err := p.UpdatePriorities(s.Index, s.Gen, pr); err != nil {
							t.Fatal(err)
						}
					}
					return slices.Concat(s.Reward, s.Weight, s.Obs)
				}
				a := mk()
				src := rand.NewPCG(1, 2)
				r := rand.New(src)
				for k := range adds / 3 {
					step(a, r, k)
				}
				st, err := a.MarshalBinary()
				if err != nil {
					t.Fatal(err)
				}
				b := mk()
				if err := b.UnmarshalBinary(st); err != nil {
					t.Fatal(err)
				}
				if again, _ := b.MarshalBinary(); !bytes.Equal(again, st) {
					t.Fatal("the restored buffer saves another state")
				}
				srcB := *src
				rb := rand.New(&srcB)
				for k := adds / 3; k < adds/3+150; k++ {
					if x, y := step(a, r, k), step(b, rb, k); !slices.Equal(x, y) {
						t.Fatalf("operation %d after the restore: draws differ", k)
					}
				}
				sa, _ := a.MarshalBinary()
				sb, _ := b.MarshalBinary()
				if !bytes.Equal(sa, sb) {
					t.Fatal("the two buffers end in different states")
				}
			})
		}
	}
}

// TestStateRefusesOtherBuffers: a state of another kind, shape or
// capacity, or a cut one, is refused with ErrState.
func TestStateRefusesOtherBuffers(t *testing.T) {
	u, _ := NewUniform(Config{Capacity: 10, ObsSize: 2})
	p, _ := NewPrioritized(Config{Capacity: 10, ObsSize: 2})
	if err := u.Add(makeBatch(4, 2, 1, 0)); err != nil {
		t.Fatal(err)
	}
	if err := p.Add(makeBatch(4, 2, 1, 0)); err != nil {
		t.Fatal(err)
	}
	us, _ := u.MarshalBinary()
	ps, _ := p.MarshalBinary()
	u2, _ := NewUniform(Config{Capacity: 10, ObsSize: 2})
	p2, _ := NewPrioritized(Config{Capacity: 10, ObsSize: 2})
	wide, _ := NewUniform(Config{Capacity: 10, ObsSize: 3})
	big, _ := NewPrioritized(Config{Capacity: 20, ObsSize: 2})
	for name, err := range map[string]error{
		"prioritized into uniform": u2.UnmarshalBinary(ps),
		"uniform into prioritized": p2.UnmarshalBinary(us),
		"other observation size":   wide.UnmarshalBinary(us),
		"other capacity":           big.UnmarshalBinary(ps),
		"cut uniform":              u2.UnmarshalBinary(us[:len(us)-1]),
		"cut prioritized":          p2.UnmarshalBinary(ps[:len(ps)-5]),
		"longer uniform":           u2.UnmarshalBinary(append(slices.Clone(us), 0)),
		"empty":                    u2.UnmarshalBinary(nil),
	} {
		if !errors.Is(err, ErrState) {
			t.Errorf("%s: %v, want ErrState", name, err)
		}
	}
}
