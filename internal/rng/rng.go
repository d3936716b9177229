// Package rng derives every random stream in herd from the run seed and a
// stable (role, slot) identity, so that the same seed gives the same bits
// whatever the scheduling, the number of goroutines or the machine.
//
// # Why not one shared generator
//
// A shared generator hands out numbers in the order goroutines happen to ask
// for them, which makes results depend on scheduling. Instead each consumer
// (actor 3's env, learner 0's minibatch sampler, the replay buffer's
// stratified sampler …) owns a stream named by its role and slot:
//
//	r := rng.New(cfg.Seed, "actor/env", 3)
//
// Streams with different names are statistically independent: the name and
// slot are mixed with SplitMix64 into the second word of a PCG state, and the
// seed into the first.
//
// Never seed from the clock; the lint test in internal/lint rejects it.
package rng

import "math/rand/v2"

// New returns a PCG-backed generator for the stream (seed, role, slot).
// The same arguments always give the same sequence.
func New(seed uint64, role string, slot int) *rand.Rand {
	return rand.New(Source(seed, role, slot))
}

// Source is New without the *rand.Rand wrapper, for code that wants the
// raw rand.Source (for example to embed it by value).
func Source(seed uint64, role string, slot int) *rand.PCG {
	h := uint64(14695981039346656037) // FNV-1a offset basis
	for i := 0; i < len(role); i++ {
		h ^= uint64(role[i])
		h *= 1099511628211
	}
	h ^= uint64(slot) * 0x9E3779B97F4A7C15
	return rand.NewPCG(splitmix64(seed), splitmix64(h))
}

// Derive returns a new 64-bit seed for a child stream; useful when a
// component hands a seed (not a generator) to something it creates, such as
// an environment's Reset.
func Derive(seed uint64, role string, slot int) uint64 {
	return Source(seed, role, slot).Uint64()
}

// splitmix64 is Steele, Lea and Flood's finaliser (SplitMix64, OOPSLA 2014);
// it spreads nearby inputs (seed 1, seed 2) to unrelated states.
func splitmix64(x uint64) uint64 {
	x += 0x9E3779B97F4A7C15
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9
	x = (x ^ (x >> 27)) * 0x94D049BB133111EB
	return x ^ (x >> 31)
}
