package minatar

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"herd/env/internal/core"
	"herd/env/minatar/internal/nprand"
)

// codec reads or writes a game's state field by field: each game's state
// method lists its fields once, for both directions. Decoding checks that
// every value is one the game can be in (a coordinate that indexes a
// grid, a direction), so a malformed state is an error, not a panic later.
type codec struct {
	decode bool
	b      []byte // encoding: the output; decoding: what is left to read
	err    error
}

// int codes *p, which must lie in [lo, hi].
func (c *codec) int(p *int, lo, hi int) {
	if !c.decode {
		c.b = binary.AppendVarint(c.b, int64(*p))
		return
	}
	if c.err != nil {
		return
	}
	v, k := binary.Varint(c.b)
	if k <= 0 {
		c.err = errors.New("truncated")
		return
	}
	c.b = c.b[k:]
	if v < int64(lo) || v > int64(hi) {
		c.err = fmt.Errorf("value %d outside [%d, %d]", v, lo, hi)
		return
	}
	*p = int(v)
}

// num is int with no bound but int32's.
func (c *codec) num(p *int) { c.int(p, math.MinInt32, math.MaxInt32) }

// coord codes a row or column.
func (c *codec) coord(p *int) { c.int(p, 0, size-1) }

func (c *codec) bool(p *bool) {
	v := 0
	if *p {
		v = 1
	}
	c.int(&v, 0, 1)
	*p = v == 1
}

func (c *codec) grid(g *grid) {
	for y := range g {
		v := int(g[y])
		c.int(&v, 0, rowMask)
		g[y] = uint16(v)
	}
}

// MarshalState returns the env's whole state (env.Snapshotter): the
// game's, the random stream's, the previous action and whether an episode
// runs.
func (e *Env) MarshalState() ([]byte, error) {
	if e.closed {
		return nil, fmt.Errorf("%w: MinAtar %s MarshalState", core.ErrClosed, e.cfg.Game)
	}
	b, err := e.rs.MarshalBinary()
	if err != nil {
		return nil, err
	}
	c := &codec{b: b}
	e.state(c)
	return c.b, nil
}

// UnmarshalState restores a state MarshalState returned from an env of
// the same Config. The next observation is drawn whole.
func (e *Env) UnmarshalState(b []byte) error {
	if e.closed {
		return fmt.Errorf("%w: MinAtar %s UnmarshalState", core.ErrClosed, e.cfg.Game)
	}
	if len(b) < nprand.StateLen {
		return fmt.Errorf("minatar: %s: a state of %d bytes is too short", e.cfg.Game, len(b))
	}
	var rs nprand.RandomState
	if err := rs.UnmarshalBinary(b[:nprand.StateLen]); err != nil {
		return fmt.Errorf("minatar: %s: %w", e.cfg.Game, err)
	}
	// Decode into a copy, so that a malformed state leaves e as it was.
	restored := *e
	restored.g = e.g.clone()
	c := &codec{decode: true, b: b[nprand.StateLen:]}
	restored.state(c)
	switch {
	case c.err != nil:
		return fmt.Errorf("minatar: %s: a malformed state: %w", e.cfg.Game, c.err)
	case len(c.b) != 0:
		return fmt.Errorf("minatar: %s: %d bytes after the state", e.cfg.Game, len(c.b))
	}
	restored.rs = rs
	// The observation buffer is kept in step with frames[shown]: start
	// both from nothing drawn.
	restored.frames, restored.shown = [2]frame{}, 0
	clear(restored.obs)
	*e = restored
	return nil
}

// state codes the Env's own fields and its game's.
func (e *Env) state(c *codec) {
	c.bool(&e.seeded)
	c.int(&e.last, 0, numActions-1)
	c.bool(&e.running)
	e.g.state(c)
}

func (b *breakout) state(c *codec) {
	c.coord(&b.ballX)
	c.coord(&b.ballY)
	c.int(&b.ballDir, 0, 3)
	c.coord(&b.pos)
	c.coord(&b.lastX)
	c.coord(&b.lastY)
	c.grid(&b.bricks)
	c.bool(&b.strike)
	c.bool(&b.terminal)
	if c.decode && c.err == nil && !b.terminal && b.ballY == size-1 {
		c.err = errors.New("a ball on the paddle's row in a running game")
	}
}

func (b *breakout) clone() game { g := *b; return &g }

func (g *asterix) state(c *codec) {
	c.coord(&g.playerX)
	c.coord(&g.playerY)
	for i := range g.entities {
		en := &g.entities[i]
		c.bool(&en.alive)
		c.int(&en.x, -1, size)
		c.int(&en.y, 0, size-1)
		c.bool(&en.right)
		c.bool(&en.gold)
	}
	for _, p := range []*int{&g.spawnSpeed, &g.spawnTimer, &g.moveSpeed, &g.moveTimer, &g.rampTimer, &g.rampIndex} {
		c.num(p)
	}
	c.bool(&g.terminal)
}

func (g *asterix) clone() game { h := *g; return &h }

func (g *freeway) state(c *codec) {
	for i := range g.cars {
		car := &g.cars[i]
		c.coord(&car.x)
		c.coord(&car.y)
		c.num(&car.timer)
		c.int(&car.speed, -5, 5)
	}
	c.coord(&g.pos)
	c.num(&g.moveTimer)
	c.num(&g.terminateTimer)
	c.bool(&g.terminal)
}

func (g *freeway) clone() game { h := *g; return &h }

func (g *spaceInvaders) state(c *codec) {
	c.coord(&g.pos)
	c.grid(&g.fBullets)
	c.grid(&g.eBullets)
	c.grid(&g.aliens)
	c.int(&g.alienDir, -1, 1)
	if c.decode && c.err == nil && g.alienDir == 0 {
		c.err = errors.New("aliens moving neither left nor right")
	}
	for _, p := range []*int{&g.moveInterval, &g.alienMoveTimer, &g.alienShotTimer, &g.rampIndex, &g.shotTimer} {
		c.num(p)
	}
	c.bool(&g.terminal)
}

func (g *spaceInvaders) clone() game { h := *g; return &h }

func (g *seaquest) state(c *codec) {
	c.num(&g.oxygen)
	c.num(&g.diverCount)
	c.coord(&g.subX)
	c.coord(&g.subY)
	c.bool(&g.subRight)
	for _, l := range []*objList{&g.fBullets, &g.eBullets, &g.fish, &g.subs, &g.divers} {
		g.objs(c, l)
	}
	for _, p := range []*int{&g.eSpawnSpeed, &g.eSpawnTimer, &g.dSpawnTimer, &g.moveSpeed, &g.rampIndex, &g.shotTimer} {
		c.num(p)
	}
	c.bool(&g.surface)
	c.bool(&g.terminal)
}

// objs codes a list of objects in order; decoding replaces the list with
// new objects (each object is in one list once, so only the values and
// their order matter).
func (g *seaquest) objs(c *codec, l *objList) {
	n := len(*l)
	c.int(&n, 0, 1<<16)
	if c.decode {
		*l = make(objList, 0, n)
		for range n {
			*l = append(*l, new(obj))
		}
	}
	for _, o := range *l {
		c.num(&o.x)
		c.num(&o.y)
		c.bool(&o.right)
		c.num(&o.move)
		c.num(&o.shot)
	}
}

// clone copies the game with lists of their own (decoding replaces them)
// and no recycled objects.
func (g *seaquest) clone() game {
	h := *g
	h.fBullets, h.eBullets, h.fish, h.subs, h.divers = nil, nil, nil, nil, nil
	h.free, h.dead = nil, nil
	return &h
}

var _ core.Snapshotter = (*Env)(nil)
