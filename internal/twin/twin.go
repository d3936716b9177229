package twin

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Spin budgets. A side that waits polls for at most its budget, then
// parks. MaxSpin is the budget while the Pair sees no sign of contention:
// long enough to cover the gap between two training steps of an
// off-policy loop, so that on an idle machine a training loop never parks.
// MinSpin is the budget once it has seen one: a few microseconds, less
// than a job, so that waiting never holds a core another thread could use.
const (
	MaxSpin = 100 * time.Microsecond
	MinSpin = 2 * time.Microsecond
)

// deschedGap: two polls of a spin loop this far apart mean the poller's
// thread was descheduled (a poll takes nanoseconds).
const deschedGap = 50 * time.Microsecond

// clockPolls (a power of two): polls of a spin loop between two clock reads.
const clockPolls = 256

// The Pair keeps the worker only while it pays. It judges hand-offs in
// epochs of epochRounds: a hand-off the worker ran saved the caller the
// job's duration minus the time the caller waited for it; one the caller
// took back saved nothing. An epoch whose savings are below 1/minGainDiv
// of what the caller would have spent running both halves itself (or
// that has already lost more than maxLoss) sends the Pair solo.
const (
	epochRounds = 32
	minGainDiv  = 8
	maxLoss     = 500 * time.Microsecond
)

// Solo backoff: how long the caller runs everything itself before it
// probes the worker again with one epoch, doubling while probes fail and
// halving when one passes.
const (
	minBackoff = time.Millisecond
	maxBackoff = 512 * time.Millisecond
)

// Job states: the caller posts a job; the worker claims it, runs it and
// marks it done; or the caller, finding it still posted in Wait, takes it
// back (to idle) and runs it itself.
const (
	idle int32 = iota
	posted
	claimed
	done
)

// Stats counts what happened to a Pair's jobs, for tests, benchmarks and
// profiles.
type Stats struct {
	Worker int64 // jobs run by the worker
	Stolen int64 // jobs posted but run by the caller (the worker was late)
	Solo   int64 // jobs run by the caller without posting (solo mode)
	Lost   int64 // hand-offs the worker ran that cost more than they saved
	Solos  int64 // times the Pair went solo
}

// Pair is a caller goroutine and one worker. Not safe for concurrent use:
// one goroutine calls its methods.
type Pair struct {
	state atomic.Int32
	job   func() // written by the caller before state becomes posted

	// Parking, each side's flag and token channel (capacity 1).
	workerParked, callerParked atomic.Bool
	wake, finished             chan struct{}

	// Written by one side, read by the other.
	idleSpin atomic.Int64 // the worker's budget (ns), set by the caller
	jobNs    atomic.Int64 // moving average of job durations on the worker
	lastNs   atomic.Int64 // the last job's duration on the worker
	desched  atomic.Int64 // descheduled polls seen by the worker

	stop    atomic.Bool
	stopped sync.WaitGroup

	// beforeClaim, set by tests, runs on the worker before it claims a
	// job: a stand-in for a descheduled thread.
	beforeClaim func()

	// The caller's own state, on other cache lines than the polled state,
	// which it writes at every hand-off.
	_           [64]byte
	maxSpin     time.Duration // MaxSpin, or 0 with one processor (NewWorker)
	base        time.Time     // the clock's zero (see now)
	closed      bool
	running     bool          // a job was started and not yet waited for
	solo        bool          // the current job runs on the caller, in Wait
	soloUntil   time.Duration // solo mode lasts until then (zero: not solo)
	backoff     time.Duration
	probing     bool          // the current epoch follows solo mode
	rounds      int           // hand-offs in the current epoch
	gain, cost  int64         // the epoch's savings and solo cost (ns)
	noisy       bool          // a poll in this epoch saw its thread descheduled
	goAt        time.Duration // when the current job was posted
	seenDesched int64         // p.desched at the end of the last epoch
	stats       Stats
}

// New starts a worker, or returns nil (run everything on the caller) when
// only one processor is available: for work that is CPU-bound on both
// sides, where a second goroutine cannot help.
func New() *Pair {
	if runtime.GOMAXPROCS(0) < 2 {
		return nil
	}
	return start(MaxSpin, nil)
}

// NewIf is New when on is true and nil (everything on the caller)
// otherwise: an algorithm's parallel setting.
func NewIf(on bool) *Pair {
	if !on {
		return nil
	}
	return New()
}

// NewWorker always starts a worker, for jobs that may block (an env
// behind a network call, say), which overlap even on one processor. With
// one processor neither side polls: it could only take the processor from
// the other side.
func NewWorker() *Pair {
	if runtime.GOMAXPROCS(0) < 2 {
		return start(0, nil)
	}
	return start(MaxSpin, nil)
}

func start(spin time.Duration, beforeClaim func()) *Pair {
	p := &Pair{maxSpin: spin, base: time.Now(), backoff: minBackoff, beforeClaim: beforeClaim,
		wake: make(chan struct{}, 1), finished: make(chan struct{}, 1)}
	p.idleSpin.Store(int64(spin))
	p.stopped.Add(1)
	go p.loop()
	return p
}

func (p *Pair) loop() {
	defer p.stopped.Done()
	var avg int64
	for {
		ok, slept := p.await(posted, &p.workerParked, p.wake, time.Duration(p.idleSpin.Load()))
		if !ok {
			return
		}
		if slept {
			p.desched.Add(1)
		}
		if p.beforeClaim != nil {
			p.beforeClaim()
		}
		if !p.state.CompareAndSwap(posted, claimed) {
			continue // the caller took it back
		}
		t := p.now()
		p.job()
		d := int64(p.now() - t)
		avg += (d - avg) / 8
		p.jobNs.Store(avg)
		p.lastNs.Store(d)
		p.state.Store(done)
		if p.callerParked.Load() {
			token(p.finished)
		}
	}
}

// await polls until state is want, for up to spin, then parks on ch until
// the other side sends a token. ok is false when the Pair is closing;
// slept reports that the poller's thread was descheduled while it polled.
// The other side stores the state, then reads the parked flag; this side
// stores the flag, then reads the state: one of them sees the other's
// write, so a wake-up is never lost (at worst a stale token wakes this
// side once more).
func (p *Pair) await(want int32, parked *atomic.Bool, ch chan struct{}, spin time.Duration) (ok, slept bool) {
	start := p.now()
	last := start
	for n := 0; ; n++ {
		if p.stop.Load() {
			return false, slept
		}
		if p.state.Load() == want {
			return true, slept
		}
		// No Gosched while polling: a trip through the scheduler costs
		// more than a job's hand-off; the short budget bounds the poll.
		// The clock is read once per clockPolls polls: a clock read costs
		// tens of polls, and that many polls still take well under MinSpin.
		if n&(clockPolls-1) != clockPolls-1 {
			continue
		}
		now := p.now()
		if now-last > deschedGap {
			slept = true
		}
		last = now
		if now-start < spin {
			continue
		}
		parked.Store(true)
		if p.state.Load() != want && !p.stop.Load() {
			<-ch
		}
		parked.Store(false)
		start, n = p.now(), 0
		last = start
	}
}

// now reads the monotonic clock: time since the Pair started. One clock
// read, where time.Now reads the wall clock as well.
func (p *Pair) now() time.Duration { return time.Since(p.base) }

// token sends a wake-up token without blocking (one pending is enough).
func token(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Go starts b on the worker and returns at once; Wait waits for it. With a
// nil or closed Pair, b runs now, on the caller; in solo mode (see the
// package doc) it runs on the caller in Wait. The two halves must not wait
// on each other: either may run after the other.
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
	now := p.now()
	if p.soloUntil != 0 {
		if now < p.soloUntil {
			p.solo = true
			return
		}
		// Solo mode is over: probe the worker with one epoch.
		p.soloUntil, p.probing = 0, true
	}
	p.goAt = now
	p.state.Store(posted)
	if p.workerParked.Load() {
		token(p.wake)
	}
}

// Wait returns when the job started by Go is done: run by the worker, or
// by the caller if the worker has not claimed it yet.
func (p *Pair) Wait() {
	if p == nil || !p.running {
		return
	}
	b := p.job
	p.running = false
	switch {
	case p.solo:
		p.solo = false
		p.job = nil
		b()
		p.stats.Solo++
	case p.state.CompareAndSwap(posted, idle):
		// The worker has not claimed it: run it here rather than wait
		// for a worker that may be descheduled. No overlap, so no gain;
		// it costs the caller nothing beyond its own half either.
		t := p.now()
		p.job = nil
		b()
		own := p.now() - t
		p.stats.Stolen++
		p.account(0, t-p.goAt+own)
	default:
		t := p.now()
		_, slept := p.await(done, &p.callerParked, p.finished, time.Duration(p.idleSpin.Load()))
		waited := p.now() - t
		p.state.Store(idle)
		p.job = nil
		p.stats.Worker++
		p.noisy = p.noisy || slept
		// What running the job here would have cost: its duration on
		// the worker, but no more than twice the usual, since a worker
		// descheduled mid-job reports the time it lay idle as well.
		job := min(time.Duration(p.lastNs.Load()), 2*time.Duration(p.jobNs.Load())+10*time.Microsecond)
		gain := job - waited
		if gain < 0 {
			p.stats.Lost++
		}
		p.account(gain, t-p.goAt+job)
	}
}

// account adds one hand-off's saving and its solo cost (the caller's half
// plus the job) to the epoch, and at the end of an epoch — or as soon as
// the epoch has lost more than maxLoss — decides whether the worker
// stays.
func (p *Pair) account(gain, cost time.Duration) {
	p.gain += int64(gain)
	p.cost += int64(cost)
	p.rounds++
	if p.rounds < epochRounds && p.gain > -int64(maxLoss) {
		return
	}
	if d := p.desched.Load(); d != p.seenDesched {
		p.seenDesched, p.noisy = d, true
	}
	now := p.now()
	if p.gain*minGainDiv < p.cost {
		// Losing, or winning too little to pay for two threads: run
		// both halves on the caller for a while.
		if p.probing {
			p.backoff = min(2*p.backoff, maxBackoff)
		}
		p.soloUntil = now + p.backoff
		p.stats.Solos++
	} else if p.probing {
		p.backoff = max(p.backoff/2, minBackoff)
	}
	// Poll long while polls see their threads keep their cores, or while
	// polling pays anyway: on a VM with a little other load descheduled
	// polls are common, and parking the worker then makes PPO's
	// minibatch hand-offs wake-ups (1.10–1.20x slower than spinning briefly first).
	spin := p.maxSpin
	if p.noisy && p.gain*10 < p.cost {
		spin = min(spin, MinSpin)
	}
	if int64(spin) != p.idleSpin.Load() {
		p.idleSpin.Store(int64(spin))
	}
	p.probing, p.rounds, p.gain, p.cost, p.noisy = false, 0, 0, 0, false
}

// Do runs a on the caller and b on the worker, and returns when both are
// done.
func (p *Pair) Do(a, b func()) {
	p.Go(b)
	a()
	p.Wait()
}

// Stats returns the counts of the Pair's jobs so far (zero for a nil
// Pair).
func (p *Pair) Stats() Stats {
	if p == nil {
		return Stats{}
	}
	return p.stats
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
