package minatar

import "herd/env/minatar/internal/nprand"

// freeway: the player crosses eight lanes of cars (rows 1–8) from row 9 to
// row 0, moving at most once every 3 frames; +1 per crossing, after which
// the player restarts at the bottom and the cars' speeds are drawn anew; a
// car that touches the player sends it back to the bottom; the episode
// ends after 2,500 frames. Channels: 0 chicken, 1 car, 2–6 the trail of a
// car that moves every 1–5 frames.
type freeway struct {
	cars           [8]freewayCar
	pos            int // player row; the player is in column 4
	moveTimer      int
	terminateTimer int
	terminal       bool
}

type freewayCar struct {
	x, y  int
	timer int
	speed int // ±(frames per move); the sign is the direction
}

const (
	freewayPlayerSpeed = 3
	freewayTimeLimit   = 2500
)

func (g *freeway) channels() int         { return 7 }
func (g *freeway) minimalActions() []int { return []int{actNoop, actUp, actDown} }
func (g *freeway) ramp() int             { return -1 }

// randomizeCars draws eight speeds in 1–5, then eight directions (the sign
// of U − 0.5); initialize also puts every car at the left edge.
func (g *freeway) randomizeCars(rs *nprand.RandomState, initialize bool) {
	var speeds [8]int
	for i := range speeds {
		speeds[i] = int(rs.Randint(1, 6))
	}
	for i := range speeds {
		switch u := rs.Rand() - 0.5; {
		case u < 0:
			speeds[i] = -speeds[i]
		case u == 0:
			speeds[i] = 0
		}
	}
	for i, s := range speeds {
		if initialize {
			g.cars[i] = freewayCar{x: 0, y: i + 1, timer: abs(s), speed: s}
		} else {
			g.cars[i].timer, g.cars[i].speed = abs(s), s
		}
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

func (g *freeway) reset(rs *nprand.RandomState) {
	g.randomizeCars(rs, true)
	g.pos = 9
	g.moveTimer = freewayPlayerSpeed
	g.terminateTimer = freewayTimeLimit
	g.terminal = false
}

func (g *freeway) act(a int, rs *nprand.RandomState) (int, bool) {
	r := 0
	if g.terminal {
		return r, true
	}
	if a == actUp && g.moveTimer == 0 {
		g.moveTimer = freewayPlayerSpeed
		g.pos = max(0, g.pos-1)
	} else if a == actDown && g.moveTimer == 0 {
		g.moveTimer = freewayPlayerSpeed
		g.pos = min(9, g.pos+1)
	}
	if g.pos == 0 {
		r++
		g.randomizeCars(rs, false)
		g.pos = 9
	}
	for i := range g.cars {
		c := &g.cars[i]
		if c.x == 4 && c.y == g.pos {
			g.pos = 9
		}
		if c.timer == 0 {
			c.timer = abs(c.speed)
			if c.speed > 0 {
				c.x++
			} else {
				c.x--
			}
			if c.x < 0 {
				c.x = 9
			} else if c.x > 9 {
				c.x = 0
			}
			if c.x == 4 && c.y == g.pos {
				g.pos = 9
			}
		} else {
			c.timer--
		}
	}
	if g.moveTimer > 0 {
		g.moveTimer--
	}
	g.terminateTimer--
	if g.terminateTimer < 0 {
		g.terminal = true
	}
	return r, g.terminal
}

func (g *freeway) observe(f *frame) {
	f.set(g.pos, 4, 0)
	trail := -1
	for _, c := range g.cars {
		f.set(c.y, c.x, 1)
		back := c.x + 1
		if c.speed > 0 {
			back = c.x - 1
		}
		if back < 0 {
			back = 9
		} else if back > 9 {
			back = 0
		}
		// A car of speed 0 (a direction draw of exactly 0.5) keeps the
		// previous car's trail channel, as MinAtar's loop variable does.
		if s := abs(c.speed); s >= 1 && s <= 5 {
			trail = 1 + s
		}
		if trail >= 0 {
			f.set(c.y, back, trail)
		}
	}
}
