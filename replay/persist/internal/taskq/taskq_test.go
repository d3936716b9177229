package taskq

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"herd/internal/rng"
)

// TestRatioUnderContention fills both queues with 20k tasks each and checks
// that, while both hold work, p0 is taken with the configured probability.
// 10k+ contended picks give a standard error of 0.004 around 0.8.
func TestRatioUnderContention(t *testing.T) {
	for _, p0 := range []float64{0.8, 0.5} {
		const n = 20000
		q := New[int](n, n, p0, rng.New(1, "taskq/test", 0))
		ctx := context.Background()
		for i := 0; i < n; i++ {
			for _, p := range []Priority{P0, P1} {
				if err := q.Reserve(ctx, p, false); err != nil {
					t.Fatal(err)
				}
				q.Put(p, i)
			}
		}
		contended, took0 := 0, 0
		next := [2]int{}
		for q.Len(P0) > 0 && q.Len(P1) > 0 {
			v, p, err := q.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if v != next[p] {
				t.Fatalf("queue %d out of order: got %d want %d", p, v, next[p])
			}
			next[p]++
			contended++
			if p == P0 {
				took0++
			}
		}
		if contended < 10000 {
			t.Fatalf("only %d contended picks", contended)
		}
		got := float64(took0) / float64(contended)
		if math.Abs(got-p0) > 0.02 {
			t.Errorf("p0=%v: took p0 in %.4f of %d contended picks", p0, got, contended)
		}
		t.Logf("p0=%v: observed %.4f over %d contended picks", p0, got, contended)
	}
}

func TestBackPressure(t *testing.T) {
	q := New[int](2, 1, 0.8, rng.New(1, "taskq/test", 1))
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		if err := q.Reserve(ctx, P0, false); err != nil {
			t.Fatal(err)
		}
		q.Put(P0, i)
	}
	if err := q.Reserve(ctx, P0, false); !errors.Is(err, ErrFull) {
		t.Fatalf("non-blocking reserve on full queue: %v", err)
	}
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := q.Reserve(cctx, P0, true); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("blocking reserve on full queue: %v", err)
	}
	// Taking one task frees one slot.
	if _, _, err := q.Next(ctx); err != nil {
		t.Fatal(err)
	}
	if err := q.Reserve(ctx, P0, false); err != nil {
		t.Fatalf("reserve after Next: %v", err)
	}
	// Next honours cancellation on an empty queue.
	q2 := New[int](1, 1, 0.8, rng.New(1, "taskq/test", 2))
	cctx2, cancel2 := context.WithCancel(ctx)
	cancel2()
	if _, _, err := q2.Next(cctx2); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next on cancelled ctx: %v", err)
	}
}
