package classic

import "herd/env/internal/core"

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
