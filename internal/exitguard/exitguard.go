package exitguard

import (
	"context"
	"sync"
)

// Guard orders held steps before an exit. Its zero value is ready.
type Guard struct {
	mu sync.RWMutex
}

type key struct{}

// With returns ctx carrying g.
func With(ctx context.Context, g *Guard) context.Context {
	return context.WithValue(ctx, key{}, g)
}

// Hold marks the start of a step that an exit must not cut; release marks
// its end. Without a Guard in ctx it does nothing. Once Wait has begun,
// Hold blocks for ever: the process is exiting.
func Hold(ctx context.Context) (release func()) {
	g, _ := ctx.Value(key{}).(*Guard)
	if g == nil {
		return func() {}
	}
	g.mu.RLock()
	return g.mu.RUnlock
}

// Wait returns once no step holds g, and keeps any new one from starting;
// the caller then exits.
func (g *Guard) Wait() { g.mu.Lock() }

// Release undoes Wait, for a caller that decided not to exit after all.
func (g *Guard) Release() { g.mu.Unlock() }
