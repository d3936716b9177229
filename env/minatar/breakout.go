package minatar

import "herd/env/minatar/internal/nprand"

// breakout: a paddle on the bottom row bounces a ball that moves only along
// diagonals into three rows of bricks (rows 1–3); +1 per brick broken, a
// fresh wall once all are gone, terminal when the ball passes the paddle.
// Channels: 0 paddle, 1 ball, 2 trail (the ball's previous cell), 3 brick.
type breakout struct {
	ballX, ballY int
	ballDir      int // 0 up-left, 1 up-right, 2 down-right, 3 down-left
	pos          int // paddle column
	lastX, lastY int
	bricks       grid
	strike       bool
	terminal     bool
}

func (b *breakout) channels() int         { return 4 }
func (b *breakout) minimalActions() []int { return []int{actNoop, actLeft, actRight} }
func (b *breakout) ramp() int             { return -1 }

func (b *breakout) reset(rs *nprand.RandomState) {
	b.ballY = 3
	if rs.Randint(0, 2) == 0 {
		b.ballX, b.ballDir = 0, 2
	} else {
		b.ballX, b.ballDir = 9, 3
	}
	b.pos = 4
	b.bricks = grid{}
	b.fillBricks()
	b.strike = false
	b.lastX, b.lastY = b.ballX, b.ballY
	b.terminal = false
}

func (b *breakout) fillBricks() {
	for y := 1; y <= 3; y++ {
		b.bricks[y] = rowMask
	}
}

func (b *breakout) anyBrick() bool {
	for _, r := range b.bricks {
		if r != 0 {
			return true
		}
	}
	return false
}

// Reflections of the direction off a side wall, off the top (or a brick
// or the paddle's centre), and off the paddle's edge.
var (
	reflectX      = [4]int{1, 0, 3, 2}
	reflectY      = [4]int{3, 2, 1, 0}
	reflectCorner = [4]int{2, 3, 0, 1}
)

func (b *breakout) act(a int, _ *nprand.RandomState) (int, bool) {
	r := 0
	if b.terminal {
		return r, true
	}
	switch a {
	case actLeft:
		b.pos = max(0, b.pos-1)
	case actRight:
		b.pos = min(9, b.pos+1)
	}
	b.lastX, b.lastY = b.ballX, b.ballY
	nx, ny := b.ballX, b.ballY
	switch b.ballDir {
	case 0:
		nx, ny = nx-1, ny-1
	case 1:
		nx, ny = nx+1, ny-1
	case 2:
		nx, ny = nx+1, ny+1
	case 3:
		nx, ny = nx-1, ny+1
	}
	hit := false
	if nx < 0 || nx > 9 {
		nx = min(max(nx, 0), 9)
		b.ballDir = reflectX[b.ballDir]
	}
	switch {
	case ny < 0:
		ny = 0
		b.ballDir = reflectY[b.ballDir]
	case b.bricks[ny]>>nx&1 == 1:
		hit = true
		// A ball that struck a brick on the previous frame passes into the
		// next brick without breaking it.
		if !b.strike {
			r++
			b.strike = true
			b.bricks[ny] &^= 1 << nx
			ny = b.lastY
			b.ballDir = reflectY[b.ballDir]
		}
	case ny == 9:
		if !b.anyBrick() {
			b.fillBricks()
		}
		switch {
		case b.ballX == b.pos:
			b.ballDir = reflectY[b.ballDir]
			ny = b.lastY
		case nx == b.pos:
			b.ballDir = reflectCorner[b.ballDir]
			ny = b.lastY
		default:
			b.terminal = true
		}
	}
	if !hit {
		b.strike = false
	}
	b.ballX, b.ballY = nx, ny
	return r, b.terminal
}

func (b *breakout) observe(f *frame) {
	f.set(b.ballY, b.ballX, 1)
	f.set(9, b.pos, 0)
	f.set(b.lastY, b.lastX, 2)
	f.setGrid(3, &b.bricks)
}
