package worker

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A call that runs past d ends with DeadlineExceeded, not before d, and
// the next call gets a fresh, live context.
func TestCallTimerExpires(t *testing.T) {
	w := newCallTimer(context.Background(), 50*time.Millisecond)
	defer w.stop()
	// Quick calls first: the reused context must stay live through them.
	for range 1000 {
		c := w.begin()
		if c.Err() != nil {
			t.Fatalf("quick call: %v", c.Err())
		}
		w.end()
	}
	start := time.Now()
	c := w.begin()
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a call past its timeout was not ended within 5 s")
	}
	w.end()
	if el := time.Since(start); el < 50*time.Millisecond {
		t.Errorf("ended after %v, before the 50 ms timeout", el)
	}
	if !errors.Is(c.Err(), context.DeadlineExceeded) {
		t.Errorf("err %v, want DeadlineExceeded", c.Err())
	}
	c2 := w.begin()
	defer w.end()
	if c2 == c || c2.Err() != nil {
		t.Errorf("after a timeout the next call got the ended context (err %v)", c2.Err())
	}
	if dl, ok := c2.Deadline(); !ok || time.Until(dl) > 50*time.Millisecond || time.Until(dl) < 0 {
		t.Errorf("deadline %v (ok %v), want within the next 50 ms", dl, ok)
	}
}

// A call that began long after an earlier one is timed from its own start:
// the timer armed by the earlier call re-arms instead of ending it early.
func TestCallTimerRearms(t *testing.T) {
	const d = 100 * time.Millisecond
	w := newCallTimer(context.Background(), d)
	defer w.stop()
	w.begin()
	w.end()
	time.Sleep(d / 2)
	start := time.Now()
	c := w.begin()
	<-c.Done()
	w.end()
	if el := time.Since(start); el < d {
		t.Errorf("call ended after %v, before its own %v timeout", el, d)
	}
}

// Cancelling the parent ends the running call and every later one.
func TestCallTimerParent(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	w := newCallTimer(parent, time.Hour)
	defer w.stop()
	c := w.begin()
	cancel()
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("parent cancel did not end the running call")
	}
	w.end()
	if !errors.Is(c.Err(), context.Canceled) {
		t.Errorf("err %v, want Canceled", c.Err())
	}
	c = w.begin()
	w.end()
	if !errors.Is(c.Err(), context.Canceled) {
		t.Errorf("call after the parent ended: err %v, want Canceled", c.Err())
	}
	n := 0
	err := retry(w, func(context.Context) error { n++; return errors.New("peer gone") })
	if !errors.Is(err, context.Canceled) || n != 1 {
		t.Errorf("retry after cancel: err %v after %d calls, want Canceled after 1", err, n)
	}
}

func TestPolicyTimingPercentiles(t *testing.T) {
	var p PolicyTiming
	if r50, r99, l50, l99 := p.Percentiles(); r50|r99 != 0 || l50|l99 != 0 {
		t.Fatalf("empty: %d %d %d %d, want zeros", r50, r99, l50, l99)
	}
	now := time.Unix(100, 0)
	for i := 1; i <= 100; i++ {
		// Batch i has i rows and one request that waited i ms.
		p.record(i, []time.Time{now.Add(-time.Duration(i) * time.Millisecond)}, now, time.Microsecond)
	}
	r50, r99, l50, l99 := p.Percentiles()
	if r50 != 50 || r99 != 99 || l50 != 50000 || l99 != 99000 {
		t.Errorf("percentiles: rows %d/%d, latency %d/%d µs; want 50/99 and 50000/99000", r50, r99, l50, l99)
	}
	if p.Batches.Load() != 100 || p.Rows.Load() != 5050 || p.Requests.Load() != 100 {
		t.Errorf("totals: %d batches, %d rows, %d requests", p.Batches.Load(), p.Rows.Load(), p.Requests.Load())
	}
	// Only the last recentBatches count.
	for range recentBatches {
		p.record(7, nil, now, 0)
	}
	if r50, r99, _, _ := p.Percentiles(); r50 != 7 || r99 != 7 {
		t.Errorf("after %d batches of 7 rows: p50 %d, p99 %d", recentBatches, r50, r99)
	}
}

// TestRetryBacksOff: calls that fail at once are retried after pauses
// that double up to half a second — a handful in a second, not hundreds —
// and a success ends the retries.
func TestRetryBacksOff(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	w := newCallTimer(ctx, time.Second)
	defer w.stop()
	n := 0
	err := retry(w, func(context.Context) error { n++; return errors.New("server refuses") })
	// Pauses 1, 2, 4, …, 256, 500 ms: about 10 calls in the second.
	if !errors.Is(err, context.DeadlineExceeded) || n < 5 || n > 20 {
		t.Errorf("retry for 1 s against a refusing server: %d calls, %v; want 5–20 and the deadline", n, err)
	}
	w2 := newCallTimer(context.Background(), time.Second)
	defer w2.stop()
	n = 0
	if err := retry(w2, func(context.Context) error {
		if n++; n < 3 {
			return errors.New("once")
		}
		return nil
	}); err != nil || n != 3 {
		t.Errorf("retry until success: %v after %d calls, want nil after 3", err, n)
	}
}
