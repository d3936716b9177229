//go:build race

package box2d

import "sync"

// box2dMu serialises Box2D calls in -race builds only; see sync.go.
var box2dMu sync.Mutex

func box2dLock()   { box2dMu.Lock() }
func box2dUnlock() { box2dMu.Unlock() }

// raceEnabled lets long single-goroutine tests skip themselves under -race,
// where they check nothing the short ones do not.
const raceEnabled = true
