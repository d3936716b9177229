package pal

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"herd/algo"
	"herd/sample"
	"herd/weights"
)

// fakeLearner is a SplitLearner with no networks: its gradient records
// the learner slot and the state it was computed at, and the service's
// Apply records what it applied, so the tests see the order and the
// staleness.
type fakeLearner struct {
	slot    int
	n       uint64 // updates in the state held
	r       *rand.Rand
	applied []fakeApply // the service's learner only
}

type fakeApply struct {
	t      algo.Ticket
	n      int     // gradients merged
	slot   float32 // Parts[0][0]: the (mean) slot
	stateN float64 // the (mean) state the gradients were computed at
}

func (f *fakeLearner) Learn(context.Context, algo.Replay, int64, int64) ([]algo.Stat, error) {
	return nil, nil
}
func (f *fakeLearner) Weights() *weights.Version { return weights.New(f.n, nil) }
func (f *fakeLearner) Close() error              { return nil }
func (f *fakeLearner) SetSlot(i int)             { f.slot, f.r = i, rand.New(rand.NewPCG(uint64(i), 1)) }
func (f *fakeLearner) Due(dst []algo.Ticket, _ algo.Replay, prev, step int64, next uint64) []algo.Ticket {
	for s := prev + 1; s <= step; s++ {
		dst = append(dst, algo.Ticket{Step: s, Index: next})
		next++
	}
	return dst
}
func (f *fakeLearner) State() *weights.Version { return weights.New(f.n, nil) }
func (f *fakeLearner) SetState(v *weights.Version) error {
	f.n = v.N
	return nil
}
func (f *fakeLearner) NewGrad() *algo.Grad {
	return &algo.Grad{N: 1, Parts: [][]float32{make([]float32, 1)}, Has: []int{0}, Steps: []int{0}, Stats: make([]algo.Stat, 1)}
}
func (f *fakeLearner) Grad(_ context.Context, _ algo.Replay, t algo.Ticket, g *algo.Grad) error {
	// Learners finish in a shuffled order.
	time.Sleep(time.Duration(f.r.IntN(200)) * time.Microsecond)
	g.Ticket, g.N, g.Has[0], g.Parts[0][0] = t, 1, 1, float32(f.slot)
	g.Stats = append(g.Stats[:0], algo.Stat{Name: "state", Value: float64(f.n)})
	return nil
}
func (f *fakeLearner) Apply(g *algo.Grad) ([]algo.Stat, error) {
	f.applied = append(f.applied, fakeApply{t: g.Ticket, n: g.N, slot: g.Parts[0][0], stateN: g.Stats[0].Value})
	f.n += uint64(g.N)
	return nil, nil
}

// fakeReplay is always full enough.
type fakeReplay struct{}

func (fakeReplay) Add(*sample.Transitions) error                        { return nil }
func (fakeReplay) Len() int                                             { return 1 << 20 }
func (fakeReplay) Sample(*algo.Minibatch, int, int64, *rand.Rand) error { return nil }
func (fakeReplay) UpdatePriorities(*algo.Minibatch, []float32) error    { return nil }
func (fakeReplay) Fork() algo.Replay                                    { return fakeReplay{} }

// runFakeService serves `steps` env steps committed one by one (an actor
// stand-in) with M fake learners in mode.
func runFakeService(t *testing.T, M int, mode string, steps int64) *fakeLearner {
	t.Helper()
	main := &fakeLearner{}
	p := &algo.Pieces{OffPolicy: algo.OffPolicy{NewTransitionLearner: func() (algo.TransitionLearner, error) {
		return &fakeLearner{}, nil
	}}}
	lim := newLimiter(steps, 8, false)
	store := weights.NewStore(main.Weights())
	svc, err := newService(lim, main, p, fakeReplay{}, fakeReplay{}, store,
		Options{Learners: M, LearnerMode: mode, PublishEvery: 1}, algo.Discard())
	if err != nil {
		t.Fatal(err)
	}
	defer svc.close()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			if _, ok := lim.reserve(1); !ok {
				return
			}
			lim.commit(1)
		}
	}()
	res := svc.run(context.Background())
	wg.Wait()
	if res.err != nil || res.last != steps {
		t.Fatalf("M %d %s: err %v, consumed %d of %d steps", M, mode, res.err, res.last, steps)
	}
	if store.Latest().N != uint64(steps) {
		t.Errorf("M %d %s: latest published version %d, want %d", M, mode, store.Latest().N, steps)
	}
	return main
}

// TestServiceAsyncOrder: the service applies update k, computed by
// learner (k−1) mod M, as the k-th apply — round-robin whatever order the
// learners finish in — and each gradient is computed at a state at most
// M−1 updates older than the one it is applied to.
func TestServiceAsyncOrder(t *testing.T) {
	for _, M := range []int{1, 2, 3} {
		main := runFakeService(t, M, ModeAsync, 300)
		if len(main.applied) != 300 {
			t.Fatalf("M %d: %d applies, want 300", M, len(main.applied))
		}
		maxStale := 0.0
		for i, a := range main.applied {
			k := uint64(i + 1)
			if a.t.Index != k || a.n != 1 || a.slot != float32((k-1)%uint64(M)) {
				t.Fatalf("M %d: apply %d is update %d by learner %v (%d merged); want update %d by learner %d",
					M, k, a.t.Index, a.slot, a.n, k, (k-1)%uint64(M))
			}
			stale := float64(k-1) - a.stateN // updates applied since the gradient's state
			if stale < 0 || stale > float64(M-1) {
				t.Fatalf("M %d: update %d computed at state %v: %v updates stale, bound %d", M, k, a.stateN, stale, M-1)
			}
			maxStale = max(maxStale, stale)
		}
		if M > 1 && maxStale == 0 {
			t.Errorf("M %d: no gradient was ever stale; the learners did not overlap", M)
		}
	}
}

// TestServiceSyncRounds: every update is one round, in which all M
// learners compute its gradient at one state; the average (in learner-id
// order) is applied as one update.
func TestServiceSyncRounds(t *testing.T) {
	const M, steps = 3, 301
	main := runFakeService(t, M, ModeSync, steps)
	if len(main.applied) != steps {
		t.Fatalf("%d applies, want %d", len(main.applied), steps)
	}
	for i, a := range main.applied {
		k := uint64(i + 1)
		// Mean slot of learners 0 … M−1; all at the state of k−1 updates.
		if a.n != 1 || a.t.Index != k || a.slot != float32(M-1)/2 || a.stateN != float64(k-1) {
			t.Fatalf("round %d: %+v; want update %d as one, mean slot %v, state %d", i, a, k, float32(M-1)/2, k-1)
		}
	}
}
