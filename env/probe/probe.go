package probe

import "herd/env/internal/core"

// Contexts is the number of contexts (and actions) of Bandit.
const Contexts = 4

// Cells is the length of Corridor: the goal is Cells − 1 steps to the
// right of the start.
const Cells = 6

// Bandit is a one-step contextual bandit. Observation: Box(Contexts), the
// one-hot context c drawn uniformly at Reset. Action: Discrete(Contexts).
// Reward 1 when the action is c, else 0; every episode terminates after
// its one step. A uniformly random policy's expected return is
// 1/Contexts; the optimal policy's is 1.
type Bandit struct {
	core.Episode
	ctx      int
	obs      [Contexts]float32
	rng      core.RNG
	obsSpace core.Box
	actSpace core.Discrete
}

// NewBandit returns a Bandit; call Reset before Step.
func NewBandit() *Bandit {
	b := &Bandit{Episode: core.Episode{Name: "Bandit"}, actSpace: core.Discrete{N: Contexts}}
	b.obsSpace = unitBox(Contexts)
	return b
}

func (b *Bandit) ObservationSpace() core.Space { return b.obsSpace }
func (b *Bandit) ActionSpace() core.Space      { return b.actSpace }
func (b *Bandit) Close() error                 { return b.Episode.Close() }

// Reset draws a new context.
func (b *Bandit) Reset(seed int64) ([]float32, core.Info, error) {
	if err := b.CheckReset(); err != nil {
		return nil, core.Info{}, err
	}
	b.ctx = b.rng.Reset(seed).IntN(Contexts)
	return oneHot(b.obs[:], b.ctx), core.Info{}, nil
}

// Step pays 1 for the context's action and terminates.
func (b *Bandit) Step(action []float32) ([]float32, float64, bool, bool, core.Info, error) {
	if err := b.CheckStep(); err != nil {
		return nil, 0, false, false, core.Info{}, err
	}
	a, err := b.actSpace.Index(action)
	if err != nil {
		return nil, 0, false, false, core.Info{}, err
	}
	b.Running = false
	reward := 0.0
	if a == b.ctx {
		reward = 1
	}
	return b.obs[:], reward, true, false, core.Info{}, nil
}

// Corridor is a row of Cells cells. The agent starts in cell 0; in cell k
// action k mod 2 moves forward (to k + 1) and the other action back (to
// k − 1, staying put in cell 0), so that no single action is optimal
// everywhere and the policy must tell the cells apart (a policy that only
// learned a bias toward the action paying at the goal fails). Entering
// cell Cells − 1 pays 1 and terminates; no other step pays. Observation:
// Box(Cells), the one-hot cell. Action: Discrete(2). The registered id
// truncates episodes at 15 steps, within which a uniformly random policy
// reaches the goal about a third of the time; a deterministic policy
// reaches it only by moving forward in every cell (any step back makes a
// cycle), so an untrained greedy policy does so with chance 2^−(Cells−1).
type Corridor struct {
	core.Episode
	cell     int
	obs      [Cells]float32
	obsSpace core.Box
	actSpace core.Discrete
}

// NewCorridor returns a Corridor; call Reset before Step.
func NewCorridor() *Corridor {
	c := &Corridor{Episode: core.Episode{Name: "Corridor"}, actSpace: core.Discrete{N: 2}}
	c.obsSpace = unitBox(Cells)
	return c
}

func (c *Corridor) ObservationSpace() core.Space { return c.obsSpace }
func (c *Corridor) ActionSpace() core.Space      { return c.actSpace }
func (c *Corridor) Close() error                 { return c.Episode.Close() }

// Reset puts the agent in cell 0; the start is fixed, so the seed is
// unused.
func (c *Corridor) Reset(int64) ([]float32, core.Info, error) {
	if err := c.CheckReset(); err != nil {
		return nil, core.Info{}, err
	}
	c.cell = 0
	return oneHot(c.obs[:], c.cell), core.Info{}, nil
}

// Step moves one cell.
func (c *Corridor) Step(action []float32) ([]float32, float64, bool, bool, core.Info, error) {
	if err := c.CheckStep(); err != nil {
		return nil, 0, false, false, core.Info{}, err
	}
	a, err := c.actSpace.Index(action)
	if err != nil {
		return nil, 0, false, false, core.Info{}, err
	}
	if a == c.cell%2 {
		c.cell++
	} else {
		c.cell = max(0, c.cell-1)
	}
	if c.cell == Cells-1 {
		c.Running = false
		return oneHot(c.obs[:], c.cell), 1, true, false, core.Info{}, nil
	}
	return oneHot(c.obs[:], c.cell), 0, false, false, core.Info{}, nil
}

func unitBox(n int) core.Box {
	b := core.Box{Low: make([]float32, n), High: make([]float32, n)}
	for i := range b.High {
		b.High[i] = 1
	}
	return b
}

func oneHot(dst []float32, i int) []float32 {
	clear(dst)
	dst[i] = 1
	return dst
}

var (
	_ core.Env = (*Bandit)(nil)
	_ core.Env = (*Corridor)(nil)
)
