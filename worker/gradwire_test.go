package worker

import (
	"errors"
	"math"
	"slices"
	"testing"

	"herd/algo"
	"herd/internal/rng"
)

// randGrad is a gradient of parts sized lens with random values, signed
// zeros among them, part i carried (Has) unless absent[i].
func randGrad(seed uint64, lens []int, absent []bool) *algo.Grad {
	r := rng.New(seed, "test/grad", 0)
	g := &algo.Grad{Ticket: algo.Ticket{Step: 7, Index: 3}, N: 1, Targets: r.IntN(3),
		Has: make([]int, len(lens)), Steps: make([]int, len(lens)),
		Stats: []algo.Stat{{Name: "a", Value: r.NormFloat64()}, {Name: "b", Value: r.NormFloat64()}}}
	for i, n := range lens {
		p := make([]float32, n)
		for j := range p {
			switch r.IntN(8) {
			case 0:
				p[j] = float32(math.Copysign(0, -1))
			case 1:
				p[j] = 0
			default:
				p[j] = float32(r.NormFloat64())
			}
		}
		g.Parts = append(g.Parts, p)
		if !absent[i] {
			g.Has[i], g.Steps[i] = 1, 1+r.IntN(2)
		}
	}
	return g
}

// bits is g's parts as bit patterns (so that −0 and +0 differ).
func bits(g *algo.Grad) []uint32 {
	var b []uint32
	for _, p := range g.Parts {
		for _, v := range p {
			b = append(b, math.Float32bits(v))
		}
	}
	return b
}

// gradWire.average gives algo.AverageGrads' bits over the decoded
// gradients (parts, counts, steps, targets, stats), for every group size
// and with parts some learners do not carry.
func TestGradWireIsAverageGrads(t *testing.T) {
	lens := []int{37, 5, 1, 64}
	for m := 1; m <= 4; m++ {
		var gs []*algo.Grad
		var all [][]byte
		for k := range m {
			absent := make([]bool, len(lens))
			absent[1] = k%2 == 1 // part 1: carried by even learners only
			absent[2] = true     // part 2: by none
			g := randGrad(uint64(10*m+k), lens, absent)
			// −0 in every learner's: AverageGrads' sum from 0 gives +0.
			g.Parts[0][0], g.Parts[3][5] = float32(math.Copysign(0, -1)), float32(math.Copysign(0, -1))
			gs = append(gs, g)
			var w gradWire
			all = append(all, slices.Clone(w.encode(g)))
		}
		want := randGrad(0, lens, make([]bool, len(lens)))
		if err := algo.AverageGrads(want, gs); err != nil {
			t.Fatal(err)
		}
		var w gradWire
		own := gs[m-1]
		got := randGrad(1, lens, make([]bool, len(lens)))
		if err := w.average(got, own, all); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(bits(got), bits(want)) {
			t.Errorf("m=%d: the parts differ from AverageGrads'", m)
		}
		for i := range lens {
			if got.Has[i] != min(want.Has[i], 1) || got.Steps[i] != want.Steps[i] {
				t.Errorf("m=%d part %d: has %d steps %d, AverageGrads %d, %d", m, i, got.Has[i], got.Steps[i], want.Has[i], want.Steps[i])
			}
		}
		if got.Targets != want.Targets || got.N != 1 || got.Ticket != own.Ticket || !slices.Equal(got.Stats, want.Stats) {
			t.Errorf("m=%d: targets %d, N %d, ticket %+v, stats %v; want %d, 1, %+v, %v", m, got.Targets, got.N, got.Ticket, got.Stats, want.Targets, own.Ticket, want.Stats)
		}
		// In place (dst = own), as PPO's reducer averages.
		if err := w.average(own, own, all); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(bits(own), bits(want)) {
			t.Errorf("m=%d: averaging in place differs", m)
		}
	}
}

// A message of another shape or another update is an error naming the
// learner, not a silent misread.
func TestGradWireRejects(t *testing.T) {
	lens := []int{8, 3}
	g := randGrad(1, lens, make([]bool, 2))
	var w0, w1 gradWire
	good := slices.Clone(w0.encode(g))
	other := randGrad(2, []int{8, 4}, make([]bool, 2))
	late := randGrad(3, lens, make([]bool, 2))
	late.Index++
	for name, b := range map[string][]byte{
		"short":       good[:len(good)-1],
		"long":        append(slices.Clone(good), 0),
		"other shape": slices.Clone(w1.encode(other)),
		"header only": good[:20],
		"other update": func() []byte {
			var w gradWire
			return slices.Clone(w.encode(late))
		}(),
	} {
		dst := randGrad(4, lens, make([]bool, 2))
		err := w0.average(dst, g, [][]byte{good, b})
		if !errors.Is(err, algo.ErrGradShape) {
			t.Errorf("%s: %v, want ErrGradShape", name, err)
		}
	}
}

// The two buffers alternate: the message of the round before stays intact
// while the next one is encoded.
func TestGradWireKeepsLastMessage(t *testing.T) {
	lens := []int{16}
	var w gradWire
	a := w.encode(randGrad(1, lens, []bool{false}))
	keep := slices.Clone(a)
	w.encode(randGrad(2, lens, []bool{false}))
	if !slices.Equal(a, keep) {
		t.Fatal("encoding a round overwrote the message of the round before")
	}
}
