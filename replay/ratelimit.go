package replay

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
)

// RateLimiterConfig is a samples-per-insert ratio with a minimum size and an
// error buffer, as Reverb's SampleToInsertRatio.
//
// Let diff = inserts·SamplesPerInsert − samples. Sampling is allowed once
// inserts ≥ MinSizeToSample and while diff ≥ offset − ErrorBuffer;
// inserting is allowed while inserts < MinSizeToSample or
// diff ≤ offset + ErrorBuffer, where offset = MinSizeToSample ·
// SamplesPerInsert. So, after warm-up, learners sample about
// SamplesPerInsert items per inserted item, give or take ErrorBuffer.
type RateLimiterConfig struct {
	// SamplesPerInsert is the target number of sampled items per inserted
	// item. Must be positive.
	SamplesPerInsert float64
	// MinSizeToSample is the number of inserts before any sample is
	// allowed. Default 1.
	MinSizeToSample int
	// ErrorBuffer is the slack around the target, in sampled items. It
	// must be at least max(1, SamplesPerInsert) so that both sides can
	// move; batches are admitted as a whole when their first item fits,
	// so the ratio can overshoot by one batch.
	ErrorBuffer float64
}

// EnsureDefaults fills the zero fields and returns c.
func (c RateLimiterConfig) EnsureDefaults() RateLimiterConfig {
	if c.MinSizeToSample == 0 {
		c.MinSizeToSample = 1
	}
	return c
}

// Validate reports every problem of c, joined.
func (c RateLimiterConfig) Validate() error {
	var errs []error
	if !(c.SamplesPerInsert > 0) || math.IsInf(c.SamplesPerInsert, 1) {
		errs = append(errs, fmt.Errorf("%w: SamplesPerInsert %v must be positive and finite", ErrConfig, c.SamplesPerInsert))
	}
	if c.MinSizeToSample < 1 {
		errs = append(errs, fmt.Errorf("%w: MinSizeToSample %d < 1", ErrConfig, c.MinSizeToSample))
	}
	if !(c.ErrorBuffer >= max(1, c.SamplesPerInsert)) || math.IsInf(c.ErrorBuffer, 1) {
		errs = append(errs, fmt.Errorf("%w: ErrorBuffer %v must be finite and ≥ max(1, SamplesPerInsert)", ErrConfig, c.ErrorBuffer))
	}
	return errors.Join(errs...)
}

// RateLimiter blocks inserters and samplers to hold the samples-per-insert
// ratio of its config. Actors call AwaitInsert before Add and learners
// AwaitSample before Sample; both block until allowed, the context is done,
// or the limiter is closed. Reconfigure changes the ratio while running and
// wakes every waiter to re-check. All methods are safe for concurrent use;
// the limiter starts no goroutine.
type RateLimiter struct {
	mu struct {
		sync.Mutex
		cfg     RateLimiterConfig
		inserts int64
		samples int64
		closed  bool
		// changed is closed and replaced at every state change, waking
		// all waiters (a broadcast that works with select and contexts).
		changed chan struct{}
	}
}

// NewRateLimiter returns a limiter with no inserts and no samples counted.
func NewRateLimiter(cfg RateLimiterConfig) (*RateLimiter, error) {
	cfg = cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	l := &RateLimiter{}
	l.mu.cfg = cfg
	l.mu.changed = make(chan struct{})
	return l, nil
}

// Reconfigure replaces the config; waiters re-check at once.
func (l *RateLimiter) Reconfigure(cfg RateLimiterConfig) error {
	cfg = cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return err
	}
	l.mu.Lock()
	l.mu.cfg = cfg
	l.broadcastLocked()
	l.mu.Unlock()
	return nil
}

// Close wakes every waiter with ErrClosed; later calls fail the same way.
func (l *RateLimiter) Close() {
	l.mu.Lock()
	if !l.mu.closed {
		l.mu.closed = true
		l.broadcastLocked()
	}
	l.mu.Unlock()
}

func (l *RateLimiter) broadcastLocked() {
	close(l.mu.changed)
	l.mu.changed = make(chan struct{})
}

// Counts returns the inserts and samples counted so far.
func (l *RateLimiter) Counts() (inserts, samples int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.inserts, l.mu.samples
}

func (l *RateLimiter) canInsertLocked() bool {
	c := l.mu.cfg
	if l.mu.inserts < int64(c.MinSizeToSample) {
		return true
	}
	diff := float64(l.mu.inserts)*c.SamplesPerInsert - float64(l.mu.samples)
	offset := float64(c.MinSizeToSample) * c.SamplesPerInsert
	return diff+c.SamplesPerInsert <= offset+c.ErrorBuffer
}

func (l *RateLimiter) canSampleLocked() bool {
	c := l.mu.cfg
	if l.mu.inserts < int64(c.MinSizeToSample) {
		return false
	}
	diff := float64(l.mu.inserts)*c.SamplesPerInsert - float64(l.mu.samples)
	offset := float64(c.MinSizeToSample) * c.SamplesPerInsert
	return diff-1 >= offset-c.ErrorBuffer
}

// AwaitInsert blocks until an insert is allowed, then counts n inserts. It
// returns ctx.Err() (wrapped) or ErrClosed if it gives up; nothing is
// counted then.
func (l *RateLimiter) AwaitInsert(ctx context.Context, n int) error {
	return l.await(ctx, n, true)
}

// AwaitSample blocks until a sample is allowed, then counts n samples
// (items, not batches). Errors as AwaitInsert.
func (l *RateLimiter) AwaitSample(ctx context.Context, n int) error {
	return l.await(ctx, n, false)
}

func (l *RateLimiter) await(ctx context.Context, n int, insert bool) error {
	if n < 0 {
		return fmt.Errorf("%w: negative count %d", ErrConfig, n)
	}
	for {
		l.mu.Lock()
		if l.mu.closed {
			l.mu.Unlock()
			return ErrClosed
		}
		ok := false
		if insert {
			ok = l.canInsertLocked()
		} else {
			ok = l.canSampleLocked()
		}
		if ok {
			if insert {
				l.mu.inserts += int64(n)
			} else {
				l.mu.samples += int64(n)
			}
			l.broadcastLocked()
			l.mu.Unlock()
			return nil
		}
		ch := l.mu.changed
		l.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("replay: rate limiter wait: %w", ctx.Err())
		}
	}
}
