package exitguard

import (
	"context"
	"testing"
	"time"
)

// Wait returns only after a held step is released; Hold without a guard
// does nothing.
func TestWaitForHeldStep(t *testing.T) {
	Hold(context.Background())() // no guard: nothing to wait for
	var g Guard
	release := Hold(With(context.Background(), &g))
	waited := make(chan struct{})
	go func() { g.Wait(); close(waited) }()
	select {
	case <-waited:
		t.Fatal("Wait returned while a step was held")
	case <-time.After(100 * time.Millisecond):
	}
	release()
	select {
	case <-waited:
	case <-time.After(10 * time.Second):
		t.Fatal("Wait did not return after the step was released")
	}
}
