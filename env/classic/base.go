package classic

import (
	"fmt"

	"herd/env/internal/core"
)

// episode is the bookkeeping every classic env shares: whether Step is
// allowed (after Reset, before termination) and whether the env is closed.
type episode struct {
	name    string
	running bool
	closed  bool
}

func (e *episode) checkStep() error {
	if e.closed {
		return fmt.Errorf("%w: %s.Step", core.ErrClosed, e.name)
	}
	if !e.running {
		return fmt.Errorf("%w: %s.Step before Reset or after the episode terminated", core.ErrNeedsReset, e.name)
	}
	return nil
}

func (e *episode) checkReset() error {
	if e.closed {
		return fmt.Errorf("%w: %s.Reset", core.ErrClosed, e.name)
	}
	e.running = true
	return nil
}

func (e *episode) close() error {
	e.closed = true
	e.running = false
	return nil
}

// uniform draws like NumPy's Generator.uniform(low, high): low + (high −
// low)·U with U in [0, 1).
func uniform(g *core.RNG, low, high float64) float64 {
	return low + (high-low)*g.Rand().Float64()
}

func resizeState(dst []float64, n int) []float64 {
	if cap(dst) < n {
		return make([]float64, n)
	}
	return dst[:n]
}

// Every env here implements core.Env and core.Stater.
var (
	_ core.Stater = (*CartPole)(nil)
	_ core.Stater = (*Pendulum)(nil)
	_ core.Stater = (*MountainCar)(nil)
	_ core.Stater = (*MountainCarContinuous)(nil)
	_ core.Stater = (*Acrobot)(nil)
	_ core.Env    = (*CartPole)(nil)
	_ core.Env    = (*Pendulum)(nil)
	_ core.Env    = (*MountainCar)(nil)
	_ core.Env    = (*MountainCarContinuous)(nil)
	_ core.Env    = (*Acrobot)(nil)
)
