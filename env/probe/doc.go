// Package probe holds tiny envs on which any working RL algorithm learns
// the optimal policy within a few thousand steps, and a broken one
// (a sign error in the policy gradient, zeroed advantages, a value target
// that ignores the bootstrap) does not: debugging envs in the spirit of
// Andy Jones' "probe environments". They are registered as
// Probe/Bandit-v0 and Probe/Corridor-v0 (env.Make); the algorithms'
// tests train on them to show that the algorithm learns.
//
// Bandit is a one-step contextual bandit: chance is 1/Contexts. Corridor
// pays only at its far end, so the first steps' credit must come through
// the value bootstrap when a rollout is shorter than the corridor.
package probe
