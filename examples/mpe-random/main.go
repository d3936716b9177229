// Command mpe-random is the random-policy baseline of a multi-agent env:
// every agent acts uniformly at random, over the episodes and seeds that
// `herd eval` uses, and it prints the team and per-agent returns.
//
//	go run ./examples/mpe-random -env mpe/simple_spread_v3 -episodes 1000
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"

	"herd/algo"
	"herd/env"
	"herd/internal/rng"
)

// random acts uniformly in the action space from its own stream.
type random struct {
	space env.Space
	r     *rand.Rand
}

func (p *random) Act(dst, _ []float32) []float32 { return p.space.SampleTo(dst, p.r) }

func main() {
	id := flag.String("env", "mpe/simple_spread_v3", "multi-agent env id")
	episodes := flag.Int("episodes", 1000, "episodes")
	seed := flag.Uint64("seed", 0, "evaluation seed (as herd eval --seed)")
	flag.Parse()
	e, err := env.Make(*id)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mpe-random:", err)
		os.Exit(1)
	}
	p := &random{space: e.ActionSpace(), r: rng.New(*seed, "mpe-random/actor", 0)}
	e.Close()
	res, err := algo.EvaluateAgents(context.Background(), p, env.Maker{}, *id, *episodes, *seed)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mpe-random:", err)
		os.Exit(1)
	}
	fmt.Printf("random policy on %s, %d episodes: %s\n", *id, *episodes, res)
}
