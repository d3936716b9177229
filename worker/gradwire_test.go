package worker

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"herd/algo"
	"herd/internal/rng"
	"herd/transport"
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

// Learners in one process (transport.Sharer) average in place with the
// bits of the messages' path and of algo.AverageGrads, for every group
// size, with parts some learners do not carry, into their own gradients
// (PPO) or into buffers of their own (the off-policy learners).
func TestGradWireSharedIsAverageGrads(t *testing.T) {
	lens := []int{37, 5, 1, 64}
	for m := 1; m <= 4; m++ {
		for _, inPlace := range []bool{true, false} {
			var gs, own, dsts []*algo.Grad
			for k := range m {
				absent := make([]bool, len(lens))
				absent[1] = k%2 == 1
				absent[2] = true
				g := randGrad(uint64(10*m+k), lens, absent)
				g.Parts[0][0], g.Parts[3][5] = float32(math.Copysign(0, -1)), float32(math.Copysign(0, -1))
				gs = append(gs, g)
				c := randGrad(uint64(10*m+k), lens, absent)
				c.Parts[0][0], c.Parts[3][5] = g.Parts[0][0], g.Parts[3][5]
				own = append(own, c)
				d := c
				if !inPlace {
					d = randGrad(uint64(100+k), lens, make([]bool, len(lens)))
				}
				dsts = append(dsts, d)
			}
			want := randGrad(0, lens, make([]bool, len(lens)))
			if err := algo.AverageGrads(want, gs); err != nil {
				t.Fatal(err)
			}
			ip := transport.NewInproc()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			var wg sync.WaitGroup
			errs := make([]error, m)
			for k := range m {
				c, err := ip.Collective(ctx, "grad", transport.Options{Learner: k, Learners: m})
				if err != nil {
					t.Fatal(err)
				}
				wg.Go(func() {
					// In place for every size; a second round on the
					// buffers the first left.
					w := gradWire{sharedMin: 1}
					for r := range 2 {
						if errs[k] = w.exchange(ctx, c, dsts[k], own[k]); errs[k] != nil || r == 1 {
							return
						}
						if inPlace {
							// The next round's gradient, as the learner's
							// next minibatch writes it: no other learner
							// reads it before this one shares it.
							own[k].Has, own[k].Steps, own[k].Targets = slices.Clone(gs[k].Has), slices.Clone(gs[k].Steps), gs[k].Targets
							own[k].Stats, own[k].N = slices.Clone(gs[k].Stats), 1
							for i := range own[k].Parts {
								copy(own[k].Parts[i], gs[k].Parts[i])
							}
						}
					}
				})
			}
			wg.Wait()
			cancel()
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			for k, got := range dsts {
				if !slices.Equal(bits(got), bits(want)) {
					t.Errorf("m=%d in place %v, learner %d: the parts differ from AverageGrads'", m, inPlace, k)
				}
				for i := range lens {
					if got.Has[i] != min(want.Has[i], 1) || got.Steps[i] != want.Steps[i] {
						t.Errorf("m=%d learner %d part %d: has %d steps %d, AverageGrads %d, %d", m, k, i, got.Has[i], got.Steps[i], want.Has[i], want.Steps[i])
					}
				}
				if got.Targets != want.Targets || got.N != 1 || got.Ticket != gs[k].Ticket || !slices.Equal(got.Stats, want.Stats) {
					t.Errorf("m=%d learner %d: targets %d, N %d, ticket %+v, stats %v; want %d, 1, %+v, %v", m, k, got.Targets, got.N, got.Ticket, got.Stats, want.Targets, gs[k].Ticket, want.Stats)
				}
			}
		}
	}
}

// A learner of another update, or of another shape, fails the shared
// average with ErrGradShape naming it.
func TestGradWireSharedRejects(t *testing.T) {
	lens := []int{8, 3}
	for name, other := range map[string]*algo.Grad{
		"other shape":  randGrad(2, []int{8, 4}, make([]bool, 2)),
		"other update": func() *algo.Grad { g := randGrad(3, lens, make([]bool, 2)); g.Index++; return g }(),
	} {
		ip := transport.NewInproc()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		gs := []*algo.Grad{randGrad(1, lens, make([]bool, 2)), other}
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for k := range 2 {
			c, err := ip.Collective(ctx, "grad", transport.Options{Learner: k, Learners: 2})
			if err != nil {
				t.Fatal(err)
			}
			wg.Go(func() {
				w := gradWire{sharedMin: 1}
				errs[k] = w.exchange(ctx, c, gs[k], gs[k])
				c.Close()
			})
		}
		wg.Wait()
		cancel()
		if !errors.Is(errs[0], algo.ErrGradShape) || !strings.Contains(errs[0].Error(), "learner 1's gradient") {
			t.Errorf("%s: learner 0: %v, want ErrGradShape naming learner 1", name, errs[0])
		}
	}
}
