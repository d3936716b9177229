package replay

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestRateLimiterConfig(t *testing.T) {
	for _, c := range []RateLimiterConfig{
		{SamplesPerInsert: 0, ErrorBuffer: 10},
		{SamplesPerInsert: 4, ErrorBuffer: 2},
		{SamplesPerInsert: 4, ErrorBuffer: 10, MinSizeToSample: -1},
	} {
		if _, err := NewRateLimiter(c); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: %v", c, err)
		}
	}
}

// wait returns the error from done, or fails the test after 5 s.
func wait(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(5 * time.Second):
		t.Fatal("waiter was not woken")
		return nil
	}
}

// TestRateLimiterRatio follows Reverb's SampleToInsertRatio: samples wait
// for MinSizeToSample inserts, then the samples-per-insert ratio is held
// within ErrorBuffer on both sides; Reconfigure and Close wake waiters;
// a cancelled context stops a wait.
func TestRateLimiterRatio(t *testing.T) {
	l, err := NewRateLimiter(RateLimiterConfig{SamplesPerInsert: 2, MinSizeToSample: 3, ErrorBuffer: 4})
	if err != nil {
		t.Fatal(err)
	}
	bg := context.Background()
	short := func() (context.Context, context.CancelFunc) { return context.WithTimeout(bg, 20*time.Millisecond) }

	ctx, cancel := short()
	if err := l.AwaitSample(ctx, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("sample before min size: %v", err)
	}
	cancel()
	for i := 0; i < 3; i++ {
		if err := l.AwaitInsert(bg, 1); err != nil {
			t.Fatal(err)
		}
	}
	// offset = 6, diff = 6: inserts allowed while diff+2 ≤ 10.
	if err := l.AwaitInsert(bg, 1); err != nil { // diff 8
		t.Fatal(err)
	}
	if err := l.AwaitInsert(bg, 1); err != nil { // diff 10
		t.Fatal(err)
	}
	ctx, cancel = short()
	if err := l.AwaitInsert(ctx, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("insert past the error buffer: %v", err)
	}
	cancel()
	// Samples allowed while diff−1 ≥ 2: 8 of them bring diff to 2.
	for i := 0; i < 8; i++ {
		if err := l.AwaitSample(bg, 1); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel = short()
	if err := l.AwaitSample(ctx, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("sample past the error buffer: %v", err)
	}
	cancel()
	// A blocked sampler is woken by an insert.
	done := make(chan error, 1)
	go func() { done <- l.AwaitSample(bg, 1) }()
	select {
	case err := <-done:
		t.Fatalf("sampler did not block (err %v)", err)
	case <-time.After(30 * time.Millisecond):
	}
	if err := l.AwaitInsert(bg, 1); err != nil {
		t.Fatal(err)
	}
	if err := wait(t, done); err != nil {
		t.Fatal(err)
	}
	if ins, smp := l.Counts(); ins != 6 || smp != 9 {
		t.Errorf("counts %d inserts %d samples, want 6 and 9", ins, smp)
	}
	// Reconfigure wakes a blocked sampler: a huge error buffer frees it.
	// diff is now 12 − 9 = 3: a sample needs diff−1 ≥ 2, so one more
	// succeeds and the next blocks until the buffer is widened.
	if err := l.AwaitSample(bg, 1); err != nil {
		t.Fatal(err)
	}
	go func() { done <- l.AwaitSample(bg, 1) }()
	time.Sleep(10 * time.Millisecond)
	if err := l.Reconfigure(RateLimiterConfig{SamplesPerInsert: 2, MinSizeToSample: 3, ErrorBuffer: 100}); err != nil {
		t.Fatal(err)
	}
	if err := wait(t, done); err != nil {
		t.Fatal(err)
	}
	// Close wakes a blocked waiter with ErrClosed.
	_ = l.Reconfigure(RateLimiterConfig{SamplesPerInsert: 2, MinSizeToSample: 3, ErrorBuffer: 2})
	go func() { done <- l.AwaitSample(bg, 1) }() // diff 1: blocked
	time.Sleep(10 * time.Millisecond)
	l.Close()
	if err := wait(t, done); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
}
