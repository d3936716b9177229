package minatar

import (
	"math/bits"

	"herd/env/minatar/internal/nprand"
)

// spaceInvaders: a cannon on the bottom row shoots upward at a block of
// aliens that marches sideways, steps down and turns at an edge, and fires
// back from the alien nearest the cannon's column; +1 per alien shot,
// terminal when an alien or an alien bullet reaches the cannon. Aliens
// move every min(aliens left, interval) frames; each cleared wave makes the
// interval one frame shorter (down to 6). Channels: 0 cannon, 1 alien,
// 2 alien moving left, 3 alien moving right, 4 friendly bullet, 5 enemy
// bullet.
//
// Each map is one 10-bit row mask per row (bit x is column x); moves are
// rotations, as MinAtar's np.roll, so a row pushed off the bottom comes
// back at the top.
type spaceInvaders struct {
	ramping bool

	pos            int
	fBullets       grid
	eBullets       grid
	aliens         grid
	alienDir       int // −1 left, +1 right
	moveInterval   int
	alienMoveTimer int
	alienShotTimer int
	rampIndex      int
	shotTimer      int
	terminal       bool
}

const (
	siShotCoolDown       = 5
	siEnemyMoveInterval  = 12
	siEnemyShotInterval  = 10
	siMinEnemyMoveFrames = 6
)

func (g *grid) has(y, x int) bool { return g[y]>>x&1 == 1 }
func (g *grid) put(y, x int)      { g[y] |= 1 << x }

// rollDown moves every row down by one, the last row wrapping to the top.
func (g *grid) rollDown() {
	last := g[size-1]
	copy(g[1:], g[:size-1])
	g[0] = last
}

// rollUp moves every row up by one, the first row wrapping to the bottom.
func (g *grid) rollUp() {
	first := g[0]
	copy(g[:size-1], g[1:])
	g[size-1] = first
}

// rollX moves every column by d = ±1, wrapping around.
func (g *grid) rollX(d int) {
	for y, r := range g {
		if d > 0 {
			g[y] = (r<<1 | r>>(size-1)) & rowMask
		} else {
			g[y] = r>>1 | (r&1)<<(size-1)
		}
	}
}

func (g *grid) count() int {
	n := 0
	for _, r := range g {
		n += bits.OnesCount16(r)
	}
	return n
}

// column reports whether column x has any cell set.
func (g *grid) column(x int) bool {
	for _, r := range g {
		if r>>x&1 == 1 {
			return true
		}
	}
	return false
}

func (g *spaceInvaders) channels() int         { return 6 }
func (g *spaceInvaders) minimalActions() []int { return []int{actNoop, actLeft, actRight, actFire} }
func (g *spaceInvaders) ramp() int             { return g.rampIndex }

func (g *spaceInvaders) spawnWave() {
	for y := 0; y < 4; y++ {
		g.aliens[y] = 0b0011111100 // columns 2–7
	}
}

func (g *spaceInvaders) reset(*nprand.RandomState) {
	g.pos = 5
	g.fBullets, g.eBullets, g.aliens = grid{}, grid{}, grid{}
	g.spawnWave()
	g.alienDir = -1
	g.moveInterval = siEnemyMoveInterval
	g.alienMoveTimer = g.moveInterval
	g.alienShotTimer = siEnemyShotInterval
	g.rampIndex = 0
	g.shotTimer = 0
	g.terminal = false
}

// nearestAlien is the lowest alien of the occupied column nearest to the
// cannon (the left one on a tie).
func (g *spaceInvaders) nearestAlien() (y, x int, ok bool) {
	for d := 0; d < size; d++ {
		for k, c := range [2]int{g.pos - d, g.pos + d} {
			if c < 0 || c >= size || (d == 0 && k == 1) {
				continue
			}
			for y := size - 1; y >= 0; y-- {
				if g.aliens.has(y, c) {
					return y, c, true
				}
			}
		}
	}
	return 0, 0, false
}

func (g *spaceInvaders) act(a int, _ *nprand.RandomState) (int, bool) {
	r := 0
	if g.terminal {
		return r, true
	}
	switch {
	case a == actFire && g.shotTimer == 0:
		g.fBullets.put(9, g.pos)
		g.shotTimer = siShotCoolDown
	case a == actLeft:
		g.pos = max(0, g.pos-1)
	case a == actRight:
		g.pos = min(9, g.pos+1)
	}
	g.fBullets.rollUp()
	g.fBullets[size-1] = 0
	g.eBullets.rollDown()
	g.eBullets[0] = 0
	if g.eBullets.has(9, g.pos) {
		g.terminal = true
	}
	if g.aliens.has(9, g.pos) {
		g.terminal = true
	}
	if g.alienMoveTimer == 0 {
		g.alienMoveTimer = min(g.aliens.count(), g.moveInterval)
		if (g.aliens.column(0) && g.alienDir < 0) || (g.aliens.column(9) && g.alienDir > 0) {
			g.alienDir = -g.alienDir
			if g.aliens[9] != 0 {
				g.terminal = true
			}
			g.aliens.rollDown()
		} else {
			g.aliens.rollX(g.alienDir)
		}
		if g.aliens.has(9, g.pos) {
			g.terminal = true
		}
	}
	if g.alienShotTimer == 0 {
		g.alienShotTimer = siEnemyShotInterval
		// The wave is never empty here: it is refilled at the end of every
		// frame that clears it.
		if y, x, ok := g.nearestAlien(); ok {
			g.eBullets.put(y, x)
		}
	}
	for y := range g.aliens {
		kill := g.aliens[y] & g.fBullets[y]
		r += bits.OnesCount16(kill)
		g.aliens[y] &^= kill
		g.fBullets[y] &^= kill
	}
	if g.shotTimer > 0 {
		g.shotTimer--
	}
	g.alienMoveTimer--
	g.alienShotTimer--
	if g.aliens.count() == 0 {
		if g.moveInterval > siMinEnemyMoveFrames && g.ramping {
			g.moveInterval--
			g.rampIndex++
		}
		g.spawnWave()
	}
	return r, g.terminal
}

func (g *spaceInvaders) observe(f *frame) {
	f.set(9, g.pos, 0)
	f.setGrid(1, &g.aliens)
	if g.alienDir < 0 {
		f.setGrid(2, &g.aliens)
	} else {
		f.setGrid(3, &g.aliens)
	}
	f.setGrid(4, &g.fBullets)
	f.setGrid(5, &g.eBullets)
}
