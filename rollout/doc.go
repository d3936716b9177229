// Package rollout is herd's one env-step loop: it steps a vector of envs
// with actions from a Policy and turns the steps into what learners
// consume — on-policy segments (Segments) or off-policy transitions
// (Transitions), single- or multi-agent. Everything that happens at an env
// step happens here and nowhere else: the action checks, the truncation
// bootstrap r + γ·V(final observation), episode accounting, and the per-env
// reset of sampler state when an episode ends.
//
// Executors place these loops (in the learner's goroutine, in env-worker
// goroutines, in processes joined by NATS) and move their output; they do
// not step envs themselves. Where the actions come from is the Policy: an
// inline network copy with a sampler (Inline), or a batched policy worker
// or remote inference stream that an executor adapts to the same
// interface. A policy that keeps requests in flight while envs step
// (Pipelined) has the envs stepped in blocks (NewBlockSegments).
//
// rollout sits between the algorithm contract (herd/algo: PolicyNet,
// Sampler, Assembler) and the executors; it imports no executor, transport
// or network package.
package rollout
