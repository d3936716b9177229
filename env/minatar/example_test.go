package minatar_test

import (
	"fmt"

	"herd/env"
)

// Play three episodes of MinAtar's Breakout with the minimal action set
// (no-op, left, right), always moving the paddle toward the ball. The
// episodes are those MinAtar itself plays from env.seed(7) with this
// player (checked with MinAtar's Environment: returns 30, 9 and 1).
func Example() {
	e, err := env.Make("MinAtar/Breakout-v1")
	if err != nil {
		panic(err)
	}
	obs, _, err := e.Reset(7)
	if err != nil {
		panic(err)
	}
	const nc = 4 // channels: paddle, ball, trail, brick
	for ep := 0; ep < 3; ep++ {
		ret := 0.0
		for {
			paddle, ball := -1, -1
			for i := 0; i < 100; i++ {
				if obs[i*nc+0] == 1 {
					paddle = i % 10
				}
				if obs[i*nc+1] == 1 {
					ball = i % 10
				}
			}
			a := float32(0)
			if ball < paddle {
				a = 1
			} else if ball > paddle {
				a = 2
			}
			var r float64
			var term bool
			obs, r, term, _, _, err = e.Step([]float32{a})
			if err != nil {
				panic(err)
			}
			ret += r
			if term {
				break
			}
		}
		fmt.Printf("episode %d: return %v\n", ep, ret)
		if obs, _, err = e.Reset(env.NoSeed); err != nil {
			panic(err)
		}
	}
	// Output:
	// episode 0: return 30
	// episode 1: return 9
	// episode 2: return 1
}
