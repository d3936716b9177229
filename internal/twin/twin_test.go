package twin

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// TestPairRunsBothAndStops: Do and Go/Wait run both halves before
// returning, on both the polling and the parked path; Close stops the
// worker (no leak), after which the Pair runs everything on the caller.
func TestPairRunsBothAndStops(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("needs 2 processors")
	}
	before := runtime.NumGoroutine()
	p := New()
	var a, b int
	fa, fb := func() { a++ }, func() { b++ }
	for i := range 200 {
		p.Do(fa, fb)
		if i%50 == 0 {
			time.Sleep(2 * MaxSpin) // let the worker park
		}
	}
	p.Go(fb)
	a++ // the caller's half, overlapping the worker's
	p.Wait()
	p.Wait() // no job: returns at once
	if a != 201 || b != 201 {
		t.Fatalf("a=%d b=%d", a, b)
	}
	s := p.Stats()
	if s.Worker+s.Stolen+s.Solo != 201 {
		t.Fatalf("stats %+v do not add up to 201 jobs", s)
	}
	time.Sleep(2 * MaxSpin)
	p.Close()
	p.Close() // idempotent
	p.Do(fa, fb)
	if a != 202 || b != 202 {
		t.Fatal("Do after Close")
	}
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Fatalf("%d goroutines after Close, %d before", n, before)
	}
}

// TestNilPair: with one processor there is no worker, and every method
// still works on the caller's goroutine.
func TestNilPair(t *testing.T) {
	var p *Pair
	n := 0
	p.Do(func() { n++ }, func() { n += 10 })
	p.Go(func() { n += 100 })
	p.Wait()
	p.Close()
	if n != 111 {
		t.Fatalf("n = %d", n)
	}
	if p.Stats() != (Stats{}) {
		t.Fatal("nil Pair has stats")
	}
	old := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(old)
	if New() != nil {
		t.Fatal("New with GOMAXPROCS=1 started a worker")
	}
}

// TestLateWorkerFallsBack: a worker that does not pick jobs up (here it
// sleeps before claiming, as a descheduled thread would) costs the caller
// nothing but its own half: the caller takes each job back and runs it,
// soon stops posting (solo mode), and after the backoff tries the worker
// again, which then runs jobs once it is prompt.
func TestLateWorkerFallsBack(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("needs 2 processors")
	}
	var slow atomic.Bool
	slow.Store(true)
	p := start(MaxSpin, func() {
		if slow.Load() {
			time.Sleep(time.Millisecond)
		}
	})
	defer p.Close()
	spinFor := func(d time.Duration) func() {
		return func() {
			for t := time.Now(); time.Since(t) < d; {
			}
		}
	}
	var n int
	for range 2 * epochRounds {
		p.Do(spinFor(10*time.Microsecond), func() { n++ })
	}
	s := p.Stats()
	if n != 2*epochRounds || s.Worker+s.Stolen+s.Solo != 2*epochRounds {
		t.Fatalf("n=%d, stats %+v", n, s)
	}
	if s.Solos == 0 || s.Solo == 0 || s.Stolen == 0 {
		t.Fatalf("a late worker did not send the Pair solo: %+v", s)
	}
	// A prompt worker is used again after the backoff.
	slow.Store(false)
	for deadline := time.Now().Add(5 * time.Second); p.Stats().Worker == s.Worker; {
		if time.Now().After(deadline) {
			t.Fatalf("the worker never ran a job again: %+v", p.Stats())
		}
		p.Do(spinFor(20*time.Microsecond), func() { n++ })
		spinFor(10 * time.Microsecond)() // a short gap: the worker is still polling
	}
}

// TestAccount: the epoch rule on given savings, without timing. Gains
// worth the second thread keep the worker; an epoch that saves too little
// or loses sends the Pair solo at once when the loss passes maxLoss;
// failed probes double the backoff, a passed one halves it.
func TestAccount(t *testing.T) {
	p := &Pair{maxSpin: MaxSpin, base: time.Now(), backoff: minBackoff}
	p.idleSpin.Store(int64(MaxSpin))
	epoch := func(gain, cost time.Duration) {
		for range epochRounds {
			p.account(gain, cost)
		}
	}
	epoch(10*time.Microsecond, 40*time.Microsecond) // saves 25%
	if p.soloUntil != 0 || p.stats.Solos != 0 {
		t.Fatalf("a paying worker was dropped: %+v", p.stats)
	}
	epoch(0, 40*time.Microsecond) // every job taken back
	if p.soloUntil == 0 || p.stats.Solos != 1 || p.backoff != minBackoff {
		t.Fatalf("a worker that saves nothing was kept: %+v, backoff %v", p.stats, p.backoff)
	}
	// A failed probe doubles the backoff; a worker descheduled mid-job
	// ends the probe after two hand-offs.
	p.soloUntil, p.probing = 0, true
	p.account(-300*time.Microsecond, 40*time.Microsecond)
	p.account(-300*time.Microsecond, 40*time.Microsecond)
	if p.stats.Solos != 2 || p.backoff != 2*minBackoff || p.rounds != 0 {
		t.Fatalf("a losing probe: %+v, backoff %v, rounds %d", p.stats, p.backoff, p.rounds)
	}
	for range 20 {
		p.soloUntil, p.probing = 0, true
		epoch(0, time.Microsecond)
	}
	if p.backoff != maxBackoff {
		t.Fatalf("backoff %v after 20 failed probes, want the cap %v", p.backoff, maxBackoff)
	}
	p.soloUntil, p.probing = 0, true
	epoch(5*time.Microsecond, 20*time.Microsecond)
	if p.soloUntil != 0 || p.backoff != maxBackoff/2 {
		t.Fatalf("a passed probe: solo until %v, backoff %v", p.soloUntil, p.backoff)
	}
	// A descheduled poll in an epoch that saved less than a tenth (which
	// also sends the Pair solo) shortens the spin budgets for the probe
	// that follows; one that saved a quarter keeps them, since polling is
	// what earns the saving.
	p.desched.Add(1)
	epoch(time.Microsecond, 40*time.Microsecond)
	if got := time.Duration(p.idleSpin.Load()); p.soloUntil == 0 || got != MinSpin {
		t.Fatalf("spin %v after a descheduled poll in a poor epoch, want %v (solo until %v)", got, MinSpin, p.soloUntil)
	}
	p.soloUntil, p.probing = 0, true
	epoch(5*time.Microsecond, 20*time.Microsecond)
	if got := time.Duration(p.idleSpin.Load()); got != MaxSpin {
		t.Fatalf("spin %v after a quiet epoch, want %v", got, MaxSpin)
	}
	p.desched.Add(1)
	epoch(5*time.Microsecond, 20*time.Microsecond)
	if got := time.Duration(p.idleSpin.Load()); got != MaxSpin {
		t.Fatalf("spin %v after a descheduled poll in a paying epoch, want %v", got, MaxSpin)
	}
}

// TestNewWorkerOneProcessor: NewWorker starts a worker even with one
// processor (it parks instead of polling there), and a job runs on it
// while the caller's half blocks.
func TestNewWorkerOneProcessor(t *testing.T) {
	old := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(old)
	p := NewWorker()
	if p == nil {
		t.Fatal("NewWorker returned nil")
	}
	defer p.Close()
	n := 0
	for range 20 {
		p.Do(func() { time.Sleep(100 * time.Microsecond) }, func() { n++ })
	}
	if s := p.Stats(); n != 20 || s.Worker == 0 || s.Solos != 0 {
		t.Fatalf("n=%d, stats %+v: the worker never ran a job while the caller blocked", n, s)
	}
}

// BenchmarkHandOff is the cost of one Do with empty halves: the overhead a
// training step pays per hand-off.
func BenchmarkHandOff(b *testing.B) {
	p := New()
	defer p.Close()
	f := func() {}
	for b.Loop() {
		p.Do(f, f)
	}
}

// BenchmarkOverlap is one Do of two 20 µs halves, about a training step's
// pass at batch 128: 20 µs per op when the halves overlap, 40 when they
// run one after the other (solo, or one core).
func BenchmarkOverlap(b *testing.B) {
	p := New()
	defer p.Close()
	work := func() {
		for t := time.Now(); time.Since(t) < 20*time.Microsecond; {
		}
	}
	for b.Loop() {
		p.Do(work, work)
	}
	s := p.Stats()
	b.ReportMetric(float64(s.Worker)/float64(max(1, s.Worker+s.Stolen+s.Solo)), "on-worker")
}
