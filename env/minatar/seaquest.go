package minatar

import "herd/env/minatar/internal/nprand"

// seaquest: a two-cell submarine moves in four directions (rows 0–8) and
// fires forward; enemy fish and submarines (which fire too) and divers
// cross rows 1–8. +1 per enemy shot. Divers are picked up by touching
// them (at most 6 aboard). Oxygen (200 frames) runs down below the
// surface; surfacing with at least one diver refills it and drops one
// diver, or with six drops all of them and pays oxygen·10/200; every
// surfacing ramps the difficulty (faster spawns and moves). Terminal when
// hit by an enemy or its bullet, out of oxygen, or surfacing with no diver.
// Channels: 0 sub front, 1 sub back, 2 friendly bullet, 3 trail, 4 enemy
// bullet, 5 enemy fish, 6 enemy sub, 7 oxygen gauge, 8 diver gauge, 9 diver.
//
// The objects live in lists that are updated while iterated in reverse
// and from which an object is removed by value (the first equal one), as
// in MinAtar; the lists here do the same, so that every frame updates the
// same objects in the same order.
type seaquest struct {
	ramping bool

	oxygen      int
	diverCount  int
	subX, subY  int
	subRight    bool // facing right
	fBullets    objList
	eBullets    objList
	fish        objList
	subs        objList
	divers      objList
	eSpawnSpeed int
	eSpawnTimer int
	dSpawnTimer int
	moveSpeed   int
	rampIndex   int
	shotTimer   int
	surface     bool
	terminal    bool

	free, dead []*obj // recycled objects: removed ones are reused after the frame
}

// obj is a bullet [x, y, right], fish or diver [x, y, right, moveTimer] or
// enemy sub [x, y, right, moveTimer, shotTimer]; unused fields are 0.
type obj struct {
	x, y       int
	right      bool
	move, shot int
}

type objList []*obj

const (
	sqRampInterval   = 100
	sqMaxOxygen      = 200
	sqInitSpawnSpeed = 20
	sqDiverSpawn     = 30
	sqMoveInterval   = 5
	sqShotCoolDown   = 5
	sqEnemyShot      = 10
	sqDiverMove      = 5
)

func (g *seaquest) channels() int { return 10 }
func (g *seaquest) minimalActions() []int {
	return []int{actNoop, actLeft, actUp, actRight, actDown, actFire}
}
func (g *seaquest) ramp() int { return g.rampIndex }

func (g *seaquest) newObj(o obj) *obj {
	var p *obj
	if n := len(g.free); n > 0 {
		p, g.free = g.free[n-1], g.free[:n-1]
	} else {
		p = new(obj)
	}
	*p = o
	return p
}

// remove deletes the first object of *l equal in value to *p (Python's
// list.remove), which need not be p itself.
func (g *seaquest) remove(l *objList, p *obj) {
	for i, q := range *l {
		if *q == *p {
			g.dead = append(g.dead, q)
			copy((*l)[i:], (*l)[i+1:])
			(*l)[len(*l)-1] = nil
			*l = (*l)[:len(*l)-1]
			return
		}
	}
}

func (g *seaquest) recycleAll(l *objList) {
	g.free = append(g.free, *l...)
	clear(*l)
	*l = (*l)[:0]
}

func (g *seaquest) reset(*nprand.RandomState) {
	g.oxygen = sqMaxOxygen
	g.diverCount = 0
	g.subX, g.subY = 5, 0
	g.subRight = false
	for _, l := range []*objList{&g.fBullets, &g.eBullets, &g.fish, &g.subs, &g.divers} {
		g.recycleAll(l)
	}
	g.eSpawnSpeed = sqInitSpawnSpeed
	g.eSpawnTimer = g.eSpawnSpeed
	g.dSpawnTimer = sqDiverSpawn
	g.moveSpeed = sqMoveInterval
	g.rampIndex = 0
	g.shotTimer = 0
	g.surface = true
	g.terminal = false
}

func step(x int, right bool) int {
	if right {
		return x + 1
	}
	return x - 1
}

func (g *seaquest) atSub(o *obj) bool { return o.x == g.subX && o.y == g.subY }

func (g *seaquest) act(a int, rs *nprand.RandomState) (int, bool) {
	r := 0
	if g.terminal {
		return r, true
	}
	if g.eSpawnTimer == 0 {
		g.spawnEnemy(rs)
		g.eSpawnTimer = g.eSpawnSpeed
	}
	if g.dSpawnTimer == 0 {
		g.spawnDiver(rs)
		g.dSpawnTimer = sqDiverSpawn
	}
	switch {
	case a == actFire && g.shotTimer == 0:
		g.fBullets = append(g.fBullets, g.newObj(obj{x: g.subX, y: g.subY, right: g.subRight}))
		g.shotTimer = sqShotCoolDown
	case a == actLeft:
		g.subX = max(0, g.subX-1)
		g.subRight = false
	case a == actRight:
		g.subX = min(9, g.subX+1)
		g.subRight = true
	case a == actUp:
		g.subY = max(0, g.subY-1)
	case a == actDown:
		g.subY = min(8, g.subY+1)
	}

	// Python's reversed(list) reads index i, i−1, … of the list as it is
	// at each step and stops at the first index outside it.
	for i := len(g.fBullets) - 1; i >= 0 && i < len(g.fBullets); i-- {
		b := g.fBullets[i]
		b.x = step(b.x, b.right)
		if b.x < 0 || b.x > 9 {
			g.remove(&g.fBullets, b)
			continue
		}
		removed := false
		for _, f := range g.fish {
			if b.x == f.x && b.y == f.y {
				g.remove(&g.fish, f)
				g.remove(&g.fBullets, b)
				r++
				removed = true
				break
			}
		}
		if !removed {
			for _, s := range g.subs {
				if b.x == s.x && b.y == s.y {
					g.remove(&g.subs, s)
					g.remove(&g.fBullets, b)
					r++
					break
				}
			}
		}
	}

	for i := len(g.divers) - 1; i >= 0 && i < len(g.divers); i-- {
		d := g.divers[i]
		if g.atSub(d) && g.diverCount < 6 {
			g.remove(&g.divers, d)
			g.diverCount++
			continue
		}
		if d.move != 0 {
			d.move--
			continue
		}
		d.move = sqDiverMove
		d.x = step(d.x, d.right)
		if d.x < 0 || d.x > 9 {
			g.remove(&g.divers, d)
		} else if g.atSub(d) && g.diverCount < 6 {
			g.remove(&g.divers, d)
			g.diverCount++
		}
	}

	for i := len(g.subs) - 1; i >= 0 && i < len(g.subs); i-- {
		s := g.subs[i]
		if g.atSub(s) {
			g.terminal = true
		}
		if s.move == 0 {
			s.move = g.moveSpeed
			s.x = step(s.x, s.right)
			if s.x < 0 || s.x > 9 {
				g.remove(&g.subs, s)
			} else if g.atSub(s) {
				g.terminal = true
			} else {
				for _, b := range g.fBullets {
					if s.x == b.x && s.y == b.y {
						g.remove(&g.subs, s)
						g.remove(&g.fBullets, b)
						r++
						break
					}
				}
			}
		} else {
			s.move--
		}
		// A sub removed above still fires on this frame.
		if s.shot == 0 {
			s.shot = sqEnemyShot
			g.eBullets = append(g.eBullets, g.newObj(obj{x: s.x, y: s.y, right: s.right}))
		} else {
			s.shot--
		}
	}

	for i := len(g.eBullets) - 1; i >= 0 && i < len(g.eBullets); i-- {
		b := g.eBullets[i]
		if g.atSub(b) {
			g.terminal = true
		}
		b.x = step(b.x, b.right)
		if b.x < 0 || b.x > 9 {
			g.remove(&g.eBullets, b)
		} else if g.atSub(b) {
			g.terminal = true
		}
	}

	for i := len(g.fish) - 1; i >= 0 && i < len(g.fish); i-- {
		f := g.fish[i]
		if g.atSub(f) {
			g.terminal = true
		}
		if f.move != 0 {
			f.move--
			continue
		}
		f.move = g.moveSpeed
		f.x = step(f.x, f.right)
		if f.x < 0 || f.x > 9 {
			g.remove(&g.fish, f)
		} else if g.atSub(f) {
			g.terminal = true
		} else {
			for _, b := range g.fBullets {
				if f.x == b.x && f.y == b.y {
					g.remove(&g.fish, f)
					g.remove(&g.fBullets, b)
					r++
					break
				}
			}
		}
	}

	if g.eSpawnTimer > 0 {
		g.eSpawnTimer--
	}
	if g.dSpawnTimer > 0 {
		g.dSpawnTimer--
	}
	if g.shotTimer > 0 {
		g.shotTimer--
	}
	if g.oxygen <= 0 {
		g.terminal = true
	}
	if g.subY > 0 {
		g.oxygen--
		g.surface = false
	} else if !g.surface {
		if g.diverCount == 0 {
			g.terminal = true
		} else {
			r += g.surfaceSub()
		}
	}
	g.free = append(g.free, g.dead...)
	clear(g.dead)
	g.dead = g.dead[:0]
	return r, g.terminal
}

// surfaceSub refills oxygen and drops divers. With six aboard the count is
// set to 0 and then decremented like any other surfacing, so it becomes −1
// (as in MinAtar), and surfacing later with a negative count goes on
// decrementing it.
func (g *seaquest) surfaceSub() int {
	g.surface = true
	r := 0
	if g.diverCount == 6 {
		g.diverCount = 0
		r = floorDiv(g.oxygen*10, sqMaxOxygen)
	}
	g.oxygen = sqMaxOxygen
	g.diverCount--
	if g.ramping && (g.eSpawnSpeed > 1 || g.moveSpeed > 2) {
		if g.moveSpeed > 2 && g.rampIndex%2 == 1 {
			g.moveSpeed--
		}
		if g.eSpawnSpeed > 1 {
			g.eSpawnSpeed--
		}
		g.rampIndex++
	}
	return r
}

// floorDiv is Python's //.
func floorDiv(a, b int) int {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// spawnEnemy draws the side, the kind and the row, and adds nothing when
// an enemy already in that row moves the other way.
func (g *seaquest) spawnEnemy(rs *nprand.RandomState) {
	right := rs.Rand() < 1.0/2
	isSub := rs.Rand() < 1.0/3
	x := 9
	if right {
		x = 0
	}
	y := int(rs.Randint(1, 9))
	for _, l := range [2]objList{g.subs, g.fish} {
		for _, z := range l {
			if z.y == y && z.right != right {
				return
			}
		}
	}
	if isSub {
		g.subs = append(g.subs, g.newObj(obj{x: x, y: y, right: right, move: g.moveSpeed, shot: sqEnemyShot}))
	} else {
		g.fish = append(g.fish, g.newObj(obj{x: x, y: y, right: right, move: g.moveSpeed}))
	}
}

func (g *seaquest) spawnDiver(rs *nprand.RandomState) {
	right := rs.Rand() < 1.0/2
	x := 9
	if right {
		x = 0
	}
	y := int(rs.Randint(1, 9))
	g.divers = append(g.divers, g.newObj(obj{x: x, y: y, right: right, move: sqDiverMove}))
}

func (g *seaquest) observe(f *frame) {
	f.set(g.subY, g.subX, 0)
	back := g.subX + 1
	if g.subRight {
		back = g.subX - 1
	}
	f.set(g.subY, back, 1)
	for x := 0; x < floorDiv(max(0, g.oxygen)*10, sqMaxOxygen); x++ {
		f.set(9, x, 7)
	}
	// Python's slice [9 − count : 9], empty for a negative count.
	for x := max(0, 9-g.diverCount); x < 9; x++ {
		f.set(9, x, 8)
	}
	for _, b := range g.fBullets {
		f.set(b.y, b.x, 2)
	}
	for _, b := range g.eBullets {
		f.set(b.y, b.x, 4)
	}
	trail := func(o *obj) {
		bx := o.x + 1
		if o.right {
			bx = o.x - 1
		}
		if bx >= 0 && bx <= 9 {
			f.set(o.y, bx, 3)
		}
	}
	for _, o := range g.fish {
		f.set(o.y, o.x, 5)
		trail(o)
	}
	for _, s := range g.subs {
		f.set(s.y, s.x, 6)
		trail(s)
	}
	for _, d := range g.divers {
		f.set(d.y, d.x, 9)
		trail(d)
	}
}
