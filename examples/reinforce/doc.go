// Package reinforce is REINFORCE (Williams 1992, "Simple statistical
// gradient-following algorithms for connectionist reinforcement
// learning"), written against herd's algorithm contract as
// docs/guide/new-algorithm.md walks through it: a config, a Spec that
// declares its capabilities, the pieces (policy, sampler, segment
// learner) and a local loop. It is not one of the CLI's algorithms
// (algo/all); its tests train it under every executor whose needs its
// capabilities meet, with no executor code naming it.
//
// The update is the paper's Monte-Carlo policy gradient with a baseline:
// per segment of T steps × N envs, G_t is the discounted return from step
// t to the end of its episode or of the segment (no critic, so nothing is
// bootstrapped), the baseline subtracts the segment's mean return and
// divides by its standard deviation, and one Adam step descends
//
//	L(θ) = −(1/TN) Σ_t Â_t · log π_θ(a_t | s_t),  Â_t = (G_t − mean G) / std G.
//
// Cutting returns at the segment's end departs from the paper's whole
// episodes: it keeps every update one segment long, as the executors
// gather them.
package reinforce
