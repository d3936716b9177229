package twin

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// SpinFor is how long the idle worker polls for the next job, and the
// caller for the job's end, before parking: longer than the gap between
// two training steps of an off-policy loop (a few env steps), short enough
// that an idle Pair costs nothing.
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
	spin  time.Duration // how long each side polls before it parks
	state atomic.Int32
	job   func() // written by the caller before state becomes posted

	// Parking, each side's flag and token channel (capacity 1).
	workerParked, callerParked atomic.Bool
	wake, finished             chan struct{}

	stop    atomic.Bool
	stopped sync.WaitGroup
	closed  bool
	running bool // a job was started and not yet waited for
}

// New starts a polling worker, or returns nil (run everything on the
// caller) when only one processor is available: for work that is
// CPU-bound on both sides, where a second goroutine cannot help.
func New() *Pair {
	if runtime.GOMAXPROCS(0) < 2 {
		return nil
	}
	return start(SpinFor)
}

// NewWorker always starts a worker, for jobs that may block (an env
// behind a network call, say), which overlap even on one processor. It
// polls like New's with two or more processors and parks at once with
// one, where polling would only take the processor from the other side.
func NewWorker() *Pair {
	if runtime.GOMAXPROCS(0) < 2 {
		return start(0)
	}
	return start(SpinFor)
}

func start(spin time.Duration) *Pair {
	p := &Pair{spin: spin, wake: make(chan struct{}, 1), finished: make(chan struct{}, 1)}
	p.stopped.Add(1)
	go p.loop()
	return p
}

func (p *Pair) loop() {
	defer p.stopped.Done()
	for {
		if !p.await(posted, &p.workerParked, p.wake) {
			return
		}
		p.job()
		p.state.Store(done)
		if p.callerParked.Load() {
			token(p.finished)
		}
	}
}

// await polls until state is want, for up to p.spin, then parks on ch
// until the other side sends a token. It reports false when the Pair is
// closing. The other side stores the state, then reads the parked flag;
// this side stores the flag, then reads the state: one of them sees the
// other's write, so a wake-up is never lost (at worst a stale token wakes
// this side once more).
func (p *Pair) await(want int32, parked *atomic.Bool, ch chan struct{}) bool {
	start := time.Now()
	for n := 0; ; n++ {
		if p.stop.Load() {
			return false
		}
		if p.state.Load() == want {
			return true
		}
		// No Gosched while polling: a trip through the scheduler costs
		// more than a job's hand-off (it made DQN's step 40% slower);
		// parking after p.spin covers a descheduled other side.
		if n&255 != 255 || time.Since(start) < p.spin {
			continue
		}
		parked.Store(true)
		if p.state.Load() != want && !p.stop.Load() {
			<-ch
		}
		parked.Store(false)
		start, n = time.Now(), 0
	}
}

// token sends a wake-up token without blocking (one pending is enough).
func token(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
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
	if p.workerParked.Load() {
		token(p.wake)
	}
}

// Wait returns when the job started by Go is done.
func (p *Pair) Wait() {
	if p == nil || !p.running {
		return
	}
	p.await(done, &p.callerParked, p.finished)
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
	token(p.wake)
	p.stopped.Wait()
}
