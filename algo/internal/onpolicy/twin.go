package onpolicy

import "sync"

// twin runs the two independent halves of a step at once: the caller's
// goroutine runs one, a worker goroutine the other. The agent uses it to
// compute the actor's and the critic's passes in parallel — they share no
// memory until the gradients are clipped together — so that training uses
// both cores of a small machine. Results do not depend on it: each network
// is computed by one goroutine in a fixed order, whichever that is.
//
// Ownership: the Agent that creates a twin owns its goroutine and stops it
// with Close, which waits for it. After Close (or on a nil twin) Do runs
// both halves on the caller's goroutine. Not safe for concurrent use.
type twin struct {
	work    chan func()
	done    chan struct{}
	stopped sync.WaitGroup
	closed  bool
}

func newTwin() *twin {
	t := &twin{work: make(chan func()), done: make(chan struct{})}
	t.stopped.Add(1)
	go t.loop()
	return t
}

func (t *twin) loop() {
	defer t.stopped.Done()
	for f := range t.work {
		f()
		t.done <- struct{}{}
	}
}

// Do runs a on the caller's goroutine and b on the worker, and returns when
// both are done. The func values are built once by the caller, so Do does
// not allocate.
func (t *twin) Do(a, b func()) {
	if t == nil || t.closed {
		a()
		b()
		return
	}
	t.work <- b
	a()
	<-t.done
}

// Close stops the worker and waits for it. Idempotent.
func (t *twin) Close() {
	if t == nil || t.closed {
		return
	}
	t.closed = true
	close(t.work)
	t.stopped.Wait()
}
