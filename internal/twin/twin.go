package twin

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// SpinFor is how long the idle worker polls for the next job before it
// parks: longer than the gap between two training steps of an off-policy
// loop (a few env steps), short enough that an idle Pair costs nothing.
const SpinFor = 200 * time.Microsecond

// Job states.
const (
	idle int32 = iota
	posted
	done
)

// Pair is a caller goroutine and one worker. Not safe for concurrent use:
// one goroutine calls its methods.
type Pair struct {
	state  atomic.Int32
	job    func() // written by the caller before state becomes posted
	parked atomic.Bool
	wake   chan struct{} // capacity 1: a token for a parked worker
	stop   atomic.Bool

	stopped sync.WaitGroup
	closed  bool
	running bool // a job was started and not yet waited for
}

// New starts the worker, or returns nil (run everything on the caller)
// when only one processor is available.
func New() *Pair {
	if runtime.GOMAXPROCS(0) < 2 {
		return nil
	}
	p := &Pair{wake: make(chan struct{}, 1)}
	p.stopped.Add(1)
	go p.loop()
	return p
}

func (p *Pair) loop() {
	defer p.stopped.Done()
	for {
		if !p.await() {
			return
		}
		p.job()
		p.state.Store(done)
	}
}

// await polls for a posted job for up to SpinFor, then parks until the
// caller wakes it. It reports false when the Pair is closing.
func (p *Pair) await() bool {
	start := time.Now()
	for n := 0; ; n++ {
		if p.stop.Load() {
			return false
		}
		if p.state.Load() == posted {
			return true
		}
		if n&255 != 255 || time.Since(start) < SpinFor {
			continue
		}
		// Park. The caller stores posted, then reads parked; we store
		// parked, then read state: one of us sees the other's write, so
		// a job is never missed (at worst a stale token wakes us once).
		p.parked.Store(true)
		if p.state.Load() != posted && !p.stop.Load() {
			<-p.wake
		}
		p.parked.Store(false)
		start, n = time.Now(), 0
	}
}

// Go starts b on the worker and returns at once; Wait waits for it. With a
// nil or closed Pair, b runs now, on the caller.
func (p *Pair) Go(b func()) {
	if p == nil || p.closed {
		b()
		return
	}
	if p.running {
		panic("twin: Go while a job is running (missing Wait)")
	}
	p.running = true
	p.job = b
	p.state.Store(posted)
	if p.parked.Load() {
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
}

// Wait returns when the job started by Go is done.
func (p *Pair) Wait() {
	if p == nil || !p.running {
		return
	}
	for n := 0; p.state.Load() != done; n++ {
		if n&1023 == 1023 {
			runtime.Gosched() // the worker may have been descheduled
		}
	}
	p.state.Store(idle)
	p.job = nil
	p.running = false
}

// Do runs a on the caller and b on the worker, and returns when both are
// done.
func (p *Pair) Do(a, b func()) {
	p.Go(b)
	a()
	p.Wait()
}

// Close stops the worker and waits for it; the Pair then runs everything
// on the caller. Idempotent.
func (p *Pair) Close() {
	if p == nil || p.closed {
		return
	}
	p.Wait()
	p.closed = true
	p.stop.Store(true)
	select {
	case p.wake <- struct{}{}:
	default:
	}
	p.stopped.Wait()
}
