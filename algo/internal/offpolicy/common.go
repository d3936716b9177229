package offpolicy

import "slices"

// Common holds the settings every off-policy algorithm has (DQN's too),
// inlined in each algorithm's Config (yaml ",inline": the keys stay at
// the top of its section); each NewConfig gives the defaults.
type Common struct {
	// NumEnvs is the number of environments stepped together.
	NumEnvs int `yaml:"num_envs"`
	// Parallel runs part of each update (the algorithm's doc says which)
	// on a second goroutine beside the caller's work (internal/twin), with
	// results identical to one goroutine's; false keeps everything on the
	// calling goroutine.
	Parallel bool `yaml:"parallel"`
	// BufferSize is the replay memory size.
	BufferSize int `yaml:"buffer_size"`
	// Gamma is the discount γ.
	Gamma float64 `yaml:"gamma"`
	// Tau is the Polyak rate τ of the target networks (for DQN, 1 copies
	// the Q-network: a hard update).
	Tau float64 `yaml:"tau"`
	// BatchSize is the minibatch size sampled from replay.
	BatchSize int `yaml:"batch_size"`
	// LearningStarts is the number of env steps before learning starts
	// (SAC, TD3 and DDPG act uniformly at random until then).
	LearningStarts int `yaml:"learning_starts"`
	// NetArch lists the hidden widths of the networks (ReLU).
	NetArch []int `yaml:"net_arch"`
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

// WarmUp returns learning_starts, the env steps before the first update
// (algo.WarmUpper).
func (c Common) WarmUp() int64 { return int64(c.LearningStarts) }

// TransitionShape returns num_envs and one update per env step, SAC's,
// TD3's and DDPG's update interval (algo.TransitionShape; DQN's Config
// has its own).
func (c Common) TransitionShape() (numEnvs int, updateInterval float64) { return c.NumEnvs, 1 }

// Minibatch is batch_size (algo.Minibatcher).
func (c Common) Minibatch() int { return c.BatchSize }

// ReplayCapacity is buffer_size (algo.ReplaySizer).
func (c Common) ReplayCapacity() int { return c.BufferSize }
