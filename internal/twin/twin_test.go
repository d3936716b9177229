package twin

import (
	"runtime"
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
			time.Sleep(2 * SpinFor) // let the worker park
		}
	}
	p.Go(fb)
	a++ // the caller's half, overlapping the worker's
	p.Wait()
	p.Wait() // no job: returns at once
	if a != 201 || b != 201 {
		t.Fatalf("a=%d b=%d", a, b)
	}
	time.Sleep(2 * SpinFor)
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
	old := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(old)
	if New() != nil {
		t.Fatal("New with GOMAXPROCS=1 started a worker")
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

// TestNewWorkerOneProcessor: NewWorker starts a worker even with one
// processor (it parks instead of polling there), and jobs that block —
// here on each other — still complete, which they could not on one
// goroutine.
func TestNewWorkerOneProcessor(t *testing.T) {
	old := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(old)
	p := NewWorker()
	if p == nil {
		t.Fatal("NewWorker returned nil")
	}
	defer p.Close()
	for range 100 {
		ping, pong := make(chan int), make(chan int)
		// Each half waits for the other: only two goroutines can do it.
		p.Do(func() { ping <- 1; <-pong }, func() { <-ping; pong <- 2 })
	}
}
