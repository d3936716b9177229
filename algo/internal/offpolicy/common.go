package offpolicy

import "slices"

// Common holds the settings every off-policy algorithm has (DQN's too),
// for Check.
type Common struct {
	NumEnvs, BatchSize, BufferSize, LearningStarts int
	Gamma, Tau                                     float64
	NetArch                                        []int
}

// Check reports each problem with the common settings through bad (the
// algorithm's Validate collector, which adds ErrConfig and its name).
func (c Common) Check(bad func(format string, a ...any)) {
	if c.NumEnvs < 1 {
		bad("num_envs must be ≥ 1, got %d", c.NumEnvs)
	}
	if c.BatchSize < 1 {
		bad("batch_size must be ≥ 1, got %d", c.BatchSize)
	}
	if c.BufferSize < c.BatchSize {
		bad("buffer_size (%d) must be ≥ batch_size (%d)", c.BufferSize, c.BatchSize)
	}
	if !(c.Gamma >= 0 && c.Gamma <= 1) {
		bad("gamma must be in [0, 1], got %v", c.Gamma)
	}
	if !(c.Tau > 0 && c.Tau <= 1) {
		bad("tau must be in (0, 1], got %v", c.Tau)
	}
	if c.LearningStarts < 0 {
		bad("learning_starts must be ≥ 0, got %d", c.LearningStarts)
	}
	if len(c.NetArch) == 0 || slices.ContainsFunc(c.NetArch, func(w int) bool { return w < 1 }) {
		bad("net_arch must list hidden widths ≥ 1, got %v", c.NetArch)
	}
}
