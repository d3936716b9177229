package mpe

import (
	"encoding/binary"
	"fmt"
	"math"

	"herd/env/internal/core"
)

// MarshalState returns the env's whole state (env.Snapshotter): whether an
// episode runs and its step count, every entity's position and velocity,
// every agent's last action, communication state and goal, and the env's
// random stream. The observations are a function of the world, so
// UnmarshalState recomputes them.
func (e *Env) MarshalState() ([]byte, error) {
	if e.closed {
		return nil, fmt.Errorf("%w: %s.MarshalState", core.ErrClosed, e.name)
	}
	r, err := e.rng.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("mpe: %s: %w", e.name, err)
	}
	var b []byte
	f := func(vs ...float64) {
		for _, v := range vs {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
		}
	}
	b = append(b, boolByte(e.running))
	b = binary.LittleEndian.AppendUint64(b, uint64(e.steps))
	for i := range e.w.ents {
		f(e.w.ents[i].pos[:]...)
		f(e.w.ents[i].vel[:]...)
	}
	for i := range e.w.agents {
		ag := &e.w.agents[i]
		f(ag.u[:]...)
		f(ag.act...)
		f(ag.comm...)
		b = binary.LittleEndian.AppendUint64(b, uint64(ag.goal))
	}
	return append(b, r...), nil
}

// stateLen is the length of MarshalState's fixed part (before the stream).
func (e *Env) stateLen() int {
	n := 1 + 8 + len(e.w.ents)*4*8
	for i := range e.w.agents {
		n += (dimP+len(e.w.agents[i].act)+len(e.w.agents[i].comm))*8 + 8
	}
	return n
}

// UnmarshalState restores a state MarshalState returned from an env of the
// same scenario and keywords.
func (e *Env) UnmarshalState(b []byte) error {
	if e.closed {
		return fmt.Errorf("%w: %s.UnmarshalState", core.ErrClosed, e.name)
	}
	n := e.stateLen()
	if len(b) <= n || b[0] > 1 {
		return fmt.Errorf("mpe: %s: a state of %d bytes is malformed", e.name, len(b))
	}
	steps := binary.LittleEndian.Uint64(b[1:])
	if steps > uint64(e.maxCycles) {
		return fmt.Errorf("mpe: %s: a saved step count %d is past max_cycles %d", e.name, steps, e.maxCycles)
	}
	if err := e.rng.UnmarshalBinary(b[n:]); err != nil {
		return fmt.Errorf("mpe: %s: %w", e.name, err)
	}
	p := b[9:n]
	f := func(dst []float64) {
		for k := range dst {
			dst[k] = math.Float64frombits(binary.LittleEndian.Uint64(p))
			p = p[8:]
		}
	}
	for i := range e.w.ents {
		f(e.w.ents[i].pos[:])
		f(e.w.ents[i].vel[:])
	}
	for i := range e.w.agents {
		ag := &e.w.agents[i]
		f(ag.u[:])
		f(ag.act)
		f(ag.comm)
		g := binary.LittleEndian.Uint64(p)
		p = p[8:]
		if g >= uint64(max(len(e.w.ents)-e.w.nAg, 1)) {
			return fmt.Errorf("mpe: %s: a saved goal %d is out of range", e.name, g)
		}
		ag.goal = int(g)
	}
	e.running, e.steps = b[0] == 1, int(steps)
	e.live = e.live[:0]
	if e.running {
		e.live = append(e.live, e.possible...)
	}
	for i := range e.possible {
		e.observe(i)
	}
	return nil
}

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}

var _ core.Snapshotter = (*Env)(nil)
