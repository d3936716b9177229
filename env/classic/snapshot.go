package classic

import (
	"encoding/binary"
	"fmt"
	"math"

	"herd/env/internal/core"
)

// marshalState encodes what a classic env's future depends on: whether an
// episode runs, its float64 state and its random stream.
func marshalState(e *core.Episode, g *core.RNG, s []float64) ([]byte, error) {
	r, err := g.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("classic: %s: %w", e.Name, err)
	}
	b := make([]byte, 0, 1+8*len(s)+len(r))
	running := byte(0)
	if e.Running {
		running = 1
	}
	b = append(b, running)
	for _, v := range s {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
	}
	return append(b, r...), nil
}

// unmarshalState restores what marshalState wrote into e, g and s.
func unmarshalState(e *core.Episode, g *core.RNG, s []float64, b []byte) error {
	if e.Closed {
		return fmt.Errorf("%w: %s.UnmarshalState", core.ErrClosed, e.Name)
	}
	n := 1 + 8*len(s)
	if len(b) <= n || b[0] > 1 {
		return fmt.Errorf("classic: %s: a state of %d bytes is malformed", e.Name, len(b))
	}
	if err := g.UnmarshalBinary(b[n:]); err != nil {
		return fmt.Errorf("classic: %s: %w", e.Name, err)
	}
	for i := range s {
		s[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[1+8*i:]))
	}
	e.Running = b[0] == 1
	return nil
}

func (c *CartPole) MarshalState() ([]byte, error) {
	return marshalState(&c.Episode, &c.rng, c.state[:])
}
func (c *CartPole) UnmarshalState(b []byte) error {
	return unmarshalState(&c.Episode, &c.rng, c.state[:], b)
}
func (a *Acrobot) MarshalState() ([]byte, error) { return marshalState(&a.Episode, &a.rng, a.state[:]) }
func (a *Acrobot) UnmarshalState(b []byte) error {
	return unmarshalState(&a.Episode, &a.rng, a.state[:], b)
}
func (p *Pendulum) MarshalState() ([]byte, error) {
	return marshalState(&p.Episode, &p.rng, p.state[:])
}
func (p *Pendulum) UnmarshalState(b []byte) error {
	return unmarshalState(&p.Episode, &p.rng, p.state[:], b)
}
func (c *MountainCar) MarshalState() ([]byte, error) {
	return marshalState(&c.Episode, &c.rng, c.state[:])
}
func (c *MountainCar) UnmarshalState(b []byte) error {
	return unmarshalState(&c.Episode, &c.rng, c.state[:], b)
}
func (c *MountainCarContinuous) MarshalState() ([]byte, error) {
	return marshalState(&c.Episode, &c.rng, c.state[:])
}
func (c *MountainCarContinuous) UnmarshalState(b []byte) error {
	return unmarshalState(&c.Episode, &c.rng, c.state[:], b)
}

var (
	_ core.Snapshotter = (*CartPole)(nil)
	_ core.Snapshotter = (*Acrobot)(nil)
	_ core.Snapshotter = (*Pendulum)(nil)
	_ core.Snapshotter = (*MountainCar)(nil)
	_ core.Snapshotter = (*MountainCarContinuous)(nil)
)
