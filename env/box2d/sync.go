package box2d

import (
	"sync"

	b2 "github.com/ByteArena/box2d"
)

// The ByteArena port keeps two kinds of package-level mutable state, which
// matter as soon as several LunarLanders run in parallel (AsyncVector):
//
//  1. The contact-type registry is built lazily by the first contact of the
//     process (B2ContactFactory tests and sets an unexported flag). Two
//     worlds making their first contacts at once would both build it. We
//     build it once, before any env exists, by stepping a two-body world
//     under a sync.Once (initBox2D, called by NewLunarLander).
//
//  2. Profiling counters (b2_gjkCalls, B2_toiCalls, B2_toiTime, …) are
//     incremented without synchronisation in every distance and
//     time-of-impact query. They are word-sized and never read by the
//     simulation, so parallel worlds compute the same physics; but the race
//     detector rightly reports them. In -race builds only, box2dLock
//     serialises all Box2D calls so that `go test -race` checks herd's own
//     code; normal builds step worlds in parallel (race_on.go, race_off.go).
//
// Both are process-wide because the state they guard is.
var registersOnce sync.Once

// initBox2D forces the contact registry to be built in this goroutine.
func initBox2D() {
	registersOnce.Do(func() {
		box2dLock()
		defer box2dUnlock()
		w := b2.MakeB2World(b2.MakeB2Vec2(0, -10))
		gd := b2.MakeB2BodyDef()
		ground := w.CreateBody(&gd)
		edge := b2.MakeB2EdgeShape()
		edge.Set(b2.MakeB2Vec2(-1, 0), b2.MakeB2Vec2(1, 0))
		fd := b2.MakeB2FixtureDef()
		fd.Shape, fd.Filter = &edge, b2.B2Filter{CategoryBits: catGround, MaskBits: 0xFFFF}
		ground.CreateFixtureFromDef(&fd)
		bd := b2.MakeB2BodyDef()
		bd.Type = b2.B2BodyType.B2_dynamicBody
		body := w.CreateBody(&bd)
		box := b2.MakeB2PolygonShape()
		box.SetAsBox(0.5, 0.5) // overlaps the edge: the first Step creates a contact
		fd = b2.MakeB2FixtureDef()
		fd.Shape, fd.Density, fd.Filter = &box, 1, b2.B2Filter{CategoryBits: catLander, MaskBits: catGround}
		body.CreateFixtureFromDef(&fd)
		w.Step(1.0/fps, 1, 1)
	})
}
