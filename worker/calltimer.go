package worker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"herd/transport"
)

// callTimer gives one goroutine's calls, made one after another, each a
// context that ends d after the call begins, or when the parent ends.
// context.WithTimeout per call costs a context, a runtime timer and a
// registration in the parent each time — about a fifth of the no-op
// topology's CPU at 4 envs per request. Here one context is reused until it
// ends and one timer re-arms itself to the running call's deadline, so a
// call that finishes in time costs a clock read and an uncontended lock.
type callTimer struct {
	parent context.Context
	d      time.Duration
	stopAF func() bool // unregisters the parent's AfterFunc
	// retried, when set, counts the calls retry makes again.
	retried prometheus.Counter

	mu      sync.Mutex
	cur     *callCtx    // reused until it ends; guarded by mu
	start   time.Time   // when the running call began; guarded by mu
	running bool        // a call is in flight; guarded by mu
	armed   bool        // t is pending; guarded by mu
	t       *time.Timer // fires at the running call's deadline or earlier
}

func newCallTimer(parent context.Context, d time.Duration) *callTimer {
	w := &callTimer{parent: parent, d: d}
	w.t = time.AfterFunc(time.Hour, w.fire)
	w.t.Stop()
	w.stopAF = context.AfterFunc(parent, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.cur != nil {
			w.cur.end(parent.Err())
		}
	})
	return w
}

// begin starts a call and returns its context; end must follow.
func (w *callTimer) begin() context.Context {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cur == nil || w.cur.ended.Load() {
		w.cur = &callCtx{parent: w.parent, done: make(chan struct{})}
		if w.parent.Err() != nil {
			w.cur.end(w.parent.Err())
		}
	}
	w.start, w.running = now, true
	w.cur.deadline.Store(now.Add(w.d).UnixNano())
	if !w.armed {
		w.armed = true
		w.t.Reset(w.d)
	}
	return w.cur
}

// end marks the running call finished. The timer stays armed: when it
// fires between calls it only disarms, and the next begin re-arms it.
func (w *callTimer) end() {
	w.mu.Lock()
	w.running = false
	w.mu.Unlock()
}

func (w *callTimer) fire() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.armed = false
	if !w.running {
		return
	}
	if left := w.d - time.Since(w.start); left > 0 {
		w.armed = true
		w.t.Reset(left)
		return
	}
	w.cur.end(context.DeadlineExceeded)
}

// stop releases the timer and the parent's AfterFunc.
func (w *callTimer) stop() {
	w.stopAF()
	w.t.Stop()
}

// callCtx is the context of callTimer's calls.
type callCtx struct {
	parent   context.Context
	done     chan struct{}
	ended    atomic.Bool
	err      error        // set before done closes
	deadline atomic.Int64 // of the running call, Unix ns
}

// end closes the context with err; the caller holds its callTimer's mu.
func (c *callCtx) end(err error) {
	if c.ended.Swap(true) {
		return
	}
	c.err = err
	close(c.done)
}

func (c *callCtx) Deadline() (time.Time, bool) { return time.Unix(0, c.deadline.Load()), true }
func (c *callCtx) Done() <-chan struct{}       { return c.done }
func (c *callCtx) Value(key any) any           { return c.parent.Value(key) }

func (c *callCtx) Err() error {
	select {
	case <-c.done:
		return c.err
	default:
		return nil
	}
}

// retry calls f with a per-call timeout until it succeeds, fails for good
// (ErrBadRequest, ErrClosed) or the callTimer's parent ends. A call that
// failed at once is retried after a pause that doubles from
// retryPauseMin to retryPauseMax, so a peer or server that refuses every
// call is not asked hundreds of times a second; a call that waited out
// its timeout is retried at once.
func retry(w *callTimer, f func(ctx context.Context) error) error {
	pause := retryPauseMin
	for {
		began := time.Now()
		err := f(w.begin())
		w.end()
		if err == nil || errors.Is(err, transport.ErrBadRequest) || errors.Is(err, transport.ErrClosed) {
			return err
		}
		if w.parent.Err() != nil {
			return fmt.Errorf("%w (last error: %w)", w.parent.Err(), err)
		}
		if w.retried != nil {
			w.retried.Inc()
		}
		if time.Since(began) < pause {
			t := time.NewTimer(pause)
			select {
			case <-t.C:
			case <-w.parent.Done():
				t.Stop()
				return fmt.Errorf("%w (last error: %w)", w.parent.Err(), err)
			}
			pause = min(2*pause, retryPauseMax)
		} else {
			pause = retryPauseMin
		}
	}
}

// The pauses of retry between calls that failed at once.
const (
	retryPauseMin = time.Millisecond
	retryPauseMax = 500 * time.Millisecond
)
