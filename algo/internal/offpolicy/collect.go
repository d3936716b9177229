package offpolicy

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"herd/algo"
	"herd/env"
)

// Collector is the environment side of the continuous-action off-policy
// loop shared by SAC, TD3 and DDPG: N synchronous envs with episode
// statistics, the current observations s, an action buffer the algorithm
// fills, and the global step count. Each iteration the algorithm writes
// Actions (RandomActions before learning starts, its policy after), then
// calls Step, which steps the envs, stores every (s, a, r, s', terminated)
// in replay, logs finished episodes and hands the next observations over.
//
// A Collector allocates only in NewCollector; it belongs to the goroutine
// running Train.
type Collector struct {
	Envs env.Vector
	// N is the number of envs, ObsDim and ActDim the sizes of one row.
	N, ObsDim, ActDim int
	// Low and High are the finite action bounds (BoxBounds).
	Low, High []float32
	// Obs holds the N observations to act on next (N×ObsDim).
	Obs []float32
	// Actions holds the N actions Step sends (N×ActDim); the algorithm
	// writes them.
	Actions []float32
	// Batch is the result of the last Reset or Step.
	Batch *env.Batch
	// Steps counts global environment steps: N per Step.
	Steps int64
	// Replay is the one-step replay memory Step stores into.
	Replay *Replay
}

// NewCollector makes n synchronous envs of id, recording episode
// statistics, checks that the action space is a bounded Box, and makes a
// one-step uniform replay memory of capacity transitions with discount
// gamma.
func NewCollector(id string, n, capacity int, gamma float64) (*Collector, error) {
	envs, err := env.MakeVector(id, n, env.Sync, env.WithEpisodeStatistics())
	if err != nil {
		return nil, err
	}
	low, high, err := BoxBounds(id, envs.ActionSpace())
	if err != nil {
		envs.Close()
		return nil, err
	}
	obsDim := envs.ObservationSpace().Dim()
	rb, err := NewReplay(ReplayConfig{Capacity: capacity, ObsDim: obsDim, ActDim: len(low),
		NumEnvs: n, NSteps: 1, Gamma: gamma})
	if err != nil {
		envs.Close()
		return nil, fmt.Errorf("replay: %w", err)
	}
	return &Collector{Envs: envs, N: n, ObsDim: obsDim, ActDim: len(low), Low: low, High: high,
		Obs: make([]float32, n*obsDim), Actions: make([]float32, n*len(low)), Replay: rb}, nil
}

// Close closes the envs.
func (c *Collector) Close() error { return c.Envs.Close() }

// Reset resets every env with the run seed and takes the first
// observations.
func (c *Collector) Reset(seed uint64) error {
	batch, err := c.Envs.Reset(int64(seed & math.MaxInt64)) // a negative seed would mean NoSeed
	if err != nil {
		return err
	}
	c.Batch = batch
	copy(c.Obs, batch.Obs)
	return nil
}

// RandomActions fills Actions with uniformly random actions drawn from r,
// env by env: the exploration before learning starts.
func (c *Collector) RandomActions(r *rand.Rand) {
	for i := range c.N {
		c.Envs.ActionSpace().SampleTo(c.Actions[i*c.ActDim:(i+1)*c.ActDim], r)
	}
}

// Step sends Actions to the envs, stores each env's transition in Replay
// (s' is the true final observation on truncation, so the critics bootstrap
// from it), logs finished episodes at the new global step, and copies the
// next observations into Obs: the hand-off, with the next episode's first
// observation where one ended.
func (c *Collector) Step(log algo.Logger) error {
	batch, err := c.Envs.Step(c.Actions)
	if err != nil {
		return err
	}
	c.Batch = batch
	c.Steps += int64(c.N)
	for i := range c.N {
		if err := c.Replay.Store(i, c.Obs[i*c.ObsDim:(i+1)*c.ObsDim], c.Actions[i*c.ActDim:(i+1)*c.ActDim],
			batch.Rewards[i], batch.NextObsRow(i), batch.Terminated[i], batch.Truncated[i]); err != nil {
			return fmt.Errorf("store: %w", err)
		}
		if batch.Infos[i].HasEpisode {
			log.Episode(c.Steps, batch.Infos[i].Episode.Return, batch.Infos[i].Episode.Length)
		}
	}
	copy(c.Obs, batch.Obs)
	return nil
}

// CheckEnv reports why env id cannot run a tanh-squashed continuous actor
// (unknown env, or an action space that is not a bounded Box), or nil. An
// empty id is not checked: Validate may run before the env is chosen.
func CheckEnv(id string) error {
	if id == "" {
		return nil
	}
	e, err := env.Make(id)
	if err != nil {
		return fmt.Errorf("env %q: %v", id, err)
	}
	defer e.Close()
	_, _, err = BoxBounds(id, e.ActionSpace())
	return err
}

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
