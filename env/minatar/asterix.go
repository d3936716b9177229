package minatar

import "herd/env/minatar/internal/nprand"

// asterix: the player moves in four directions on rows 1–8; enemies and
// gold spawn at a side edge of a free row and cross the screen; +1 per
// gold picked up, terminal on touching an enemy. Every 100 frames the
// spawn interval shrinks by one, and every other time the move interval
// too. Channels: 0 player, 1 enemy, 2 trail, 3 gold.
type asterix struct {
	ramping bool

	playerX, playerY int
	entities         [8]asterixEntity // slot i moves along row i+1
	spawnSpeed       int
	spawnTimer       int
	moveSpeed        int
	moveTimer        int
	rampTimer        int
	rampIndex        int
	terminal         bool
}

type asterixEntity struct {
	alive bool
	x, y  int
	right bool // moving right
	gold  bool
}

const (
	asterixRampInterval = 100
	asterixSpawnSpeed   = 10
	asterixMoveInterval = 5
)

func (g *asterix) channels() int         { return 4 }
func (g *asterix) minimalActions() []int { return []int{actNoop, actLeft, actUp, actRight, actDown} }
func (g *asterix) ramp() int             { return g.rampIndex }

func (g *asterix) reset(*nprand.RandomState) {
	g.playerX, g.playerY = 5, 5
	g.entities = [8]asterixEntity{}
	g.spawnSpeed = asterixSpawnSpeed
	g.spawnTimer = g.spawnSpeed
	g.moveSpeed = asterixMoveInterval
	g.moveTimer = g.moveSpeed
	g.rampTimer = asterixRampInterval
	g.rampIndex = 0
	g.terminal = false
}

// spawn draws the side and the kind, then (if a row is free) the row.
func (g *asterix) spawn(rs *nprand.RandomState) {
	right := rs.Rand() < 1.0/2
	gold := rs.Rand() < 1.0/3
	x := 9
	if right {
		x = 0
	}
	var free [8]int
	n := 0
	for i, e := range g.entities {
		if !e.alive {
			free[n] = i
			n++
		}
	}
	if n == 0 {
		return
	}
	slot := free[rs.Randint(0, int64(n))]
	g.entities[slot] = asterixEntity{alive: true, x: x, y: slot + 1, right: right, gold: gold}
}

// touch resolves entity i sharing the player's cell.
func (g *asterix) touch(i int, r *int) {
	e := &g.entities[i]
	if e.x != g.playerX || e.y != g.playerY {
		return
	}
	if e.gold {
		e.alive = false
		*r++
	} else {
		g.terminal = true
	}
}

func (g *asterix) act(a int, rs *nprand.RandomState) (int, bool) {
	r := 0
	if g.terminal {
		return r, true
	}
	if g.spawnTimer == 0 {
		g.spawn(rs)
		g.spawnTimer = g.spawnSpeed
	}
	switch a {
	case actLeft:
		g.playerX = max(0, g.playerX-1)
	case actRight:
		g.playerX = min(9, g.playerX+1)
	case actUp:
		g.playerY = max(1, g.playerY-1)
	case actDown:
		g.playerY = min(8, g.playerY+1)
	}
	for i := range g.entities {
		if g.entities[i].alive {
			g.touch(i, &r)
		}
	}
	if g.moveTimer == 0 {
		g.moveTimer = g.moveSpeed
		for i := range g.entities {
			e := &g.entities[i]
			if !e.alive {
				continue
			}
			if e.right {
				e.x++
			} else {
				e.x--
			}
			if e.x < 0 || e.x > 9 {
				e.alive = false
				continue
			}
			g.touch(i, &r)
		}
	}
	g.spawnTimer--
	g.moveTimer--
	if g.ramping && (g.spawnSpeed > 1 || g.moveSpeed > 1) {
		if g.rampTimer >= 0 {
			g.rampTimer--
		} else {
			if g.moveSpeed > 1 && g.rampIndex%2 == 1 {
				g.moveSpeed--
			}
			if g.spawnSpeed > 1 {
				g.spawnSpeed--
			}
			g.rampIndex++
			g.rampTimer = asterixRampInterval
		}
	}
	return r, g.terminal
}

func (g *asterix) observe(f *frame) {
	f.set(g.playerY, g.playerX, 0)
	for _, e := range g.entities {
		if !e.alive {
			continue
		}
		c := 1
		if e.gold {
			c = 3
		}
		f.set(e.y, e.x, c)
		back := e.x + 1
		if e.right {
			back = e.x - 1
		}
		if back >= 0 && back <= 9 {
			f.set(e.y, back, 2)
		}
	}
}
