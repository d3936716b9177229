package flow

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"herd/algo"
	"herd/sample"
	"herd/weights"
)

// fakeReplay counts the rows added.
type fakeReplay struct {
	mu   sync.Mutex
	rows int
}

func (f *fakeReplay) Add(tr *sample.Transitions) error {
	f.mu.Lock()
	f.rows += tr.N
	f.mu.Unlock()
	return nil
}
func (f *fakeReplay) Len() int { f.mu.Lock(); defer f.mu.Unlock(); return f.rows }
func (f *fakeReplay) Sample(*algo.Minibatch, int, int64, *rand.Rand) error {
	return nil
}
func (f *fakeReplay) UpdatePriorities(*algo.Minibatch, []float32) error { return nil }

// fakeLearner records the step ranges it was asked to learn and how far
// the stored steps were ahead when it was.
type fakeLearner struct {
	ranges [][2]int64
	slow   time.Duration
}

func (f *fakeLearner) Learn(_ context.Context, _ algo.Replay, prev, step int64) ([]algo.Stat, error) {
	f.ranges = append(f.ranges, [2]int64{prev, step})
	time.Sleep(f.slow)
	return []algo.Stat{{Name: "losses/td_loss", Value: 1}}, nil
}
func (f *fakeLearner) Weights() *weights.Version { return weights.New(uint64(len(f.ranges)), nil) }
func (f *fakeLearner) Close() error              { return nil }

// TestStoreReplayUnion: under UnionAsync with a slow learner, the replay
// sub-flow learns every stored env step exactly once (its ranges tile
// (0, total] without gaps or overlaps), the store sub-flow never runs more
// than MaxLag steps (plus one item) ahead, and the union ends once both
// are done. Round-robin on one goroutine needs no lag bound.
func TestStoreReplayUnion(t *testing.T) {
	for _, async := range []bool{true, false} {
		r := &Run{Ctx: context.Background()}
		const items, perItem = 60, 10
		var xs []Experience
		for range items {
			xs = append(xs, Experience{Transitions: &sample.Transitions{N: perItem}, Report: Report{Steps: perItem}})
		}
		rb, l := &fakeReplay{}, &fakeLearner{slow: 200 * time.Microsecond}
		ledger := &Ledger{}
		if async {
			ledger.MaxLag = 30
		}
		var maxAhead int64
		src := ForEach(FromSlice(xs), func(x Experience) (Experience, error) {
			ledger.mu.Lock()
			maxAhead = max(maxAhead, ledger.stored-ledger.trained)
			ledger.mu.Unlock()
			return x, nil
		})
		store := StoreToReplay(r, rb, ledger, src)
		replay := Replay(r, rb, l, &ReplayWorkers{}, ledger)
		union := UnionRoundRobin(store, replay)
		if async {
			union = UnionAsync(store, replay)
		}
		var steps int64
		for rep, err := range union {
			if err != nil {
				t.Fatal(err)
			}
			steps += rep.Steps
		}
		if steps != items*perItem || rb.rows != items*perItem {
			t.Fatalf("async %v: reported %d steps, stored %d rows, want %d", async, steps, rb.rows, items*perItem)
		}
		var next int64
		for _, rg := range l.ranges {
			if rg[0] != next || rg[1] <= rg[0] {
				t.Fatalf("async %v: learned ranges %v do not tile (0, %d]", async, l.ranges, steps)
			}
			next = rg[1]
		}
		if next != steps {
			t.Fatalf("async %v: learned up to %d of %d steps", async, next, steps)
		}
		if async && maxAhead > ledger.MaxLag+perItem {
			t.Errorf("store ran %d steps ahead, bound %d + one item", maxAhead, ledger.MaxLag)
		}
	}
}

// stalledLearner fails its first Learn call once the store sub-flow has
// run more than the ledger's MaxLag steps ahead (so the store waits on the
// bound, and nothing but the failure can wake it).
type stalledLearner struct {
	fakeLearner
	ledger *Ledger
	err    error
}

func (f *stalledLearner) Learn(context.Context, algo.Replay, int64, int64) ([]algo.Stat, error) {
	for {
		f.ledger.mu.Lock()
		ahead := f.ledger.stored - f.ledger.trained
		f.ledger.mu.Unlock()
		if ahead > f.ledger.MaxLag {
			return nil, f.err
		}
		time.Sleep(time.Millisecond)
	}
}

// TestStoreReplayUnionFails: a replay sub-flow that fails while the store
// sub-flow waits on its lag bound ends the union with the learner's error
// (not a hang, not the store's): the failure releases the store. The
// run's context is never cancelled here, as when a caller pulls a plan
// itself.
func TestStoreReplayUnionFails(t *testing.T) {
	r := &Run{Ctx: context.Background()}
	xs := make([]Experience, 1000)
	for i := range xs {
		xs[i] = Experience{Transitions: &sample.Transitions{N: 10}, Report: Report{Steps: 10}}
	}
	ledger := &Ledger{MaxLag: 30}
	boom := errors.New("learner: NaN priority")
	rb, l := &fakeReplay{}, &stalledLearner{ledger: ledger, err: boom}
	done := make(chan error, 1)
	go func() {
		var last error
		for _, err := range UnionAsync(StoreToReplay(r, rb, ledger, FromSlice(xs)), Replay(r, rb, l, &ReplayWorkers{}, ledger)) {
			if err != nil {
				last = err
			}
		}
		done <- last
	}()
	select {
	case err := <-done:
		if !errors.Is(err, boom) {
			t.Fatalf("union ended with %v, want the learner's error", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the union still waits a minute after its replay sub-flow failed")
	}
}
