// Package twin runs two independent halves of a training step at once —
// the caller's goroutine one, a worker goroutine the other — so that
// training uses both cores of a small machine: PPO's actor and critic
// passes, DQN's online and target forwards.
//
// The hand-off is what matters at this grain. The halves are tens of
// microseconds (one MLP pass at batch 128), and waking a parked goroutine
// whose processor has gone idle costs about as much on a virtual machine
// (the earlier channel hand-off made DQN's step slower, not faster). So the
// worker, after a job, polls for the next one for up to SpinFor before it
// parks, and the caller polls for the result; while jobs come faster than
// that, as in a training loop, neither ever parks. With GOMAXPROCS = 1
// polling could only steal time from the other half, so New returns a nil
// Pair, whose methods run everything on the caller's goroutine.
//
// Results never depend on the Pair: each half touches its own memory and is
// computed by one goroutine in a fixed order, whichever goroutine that is.
//
// Ownership: whoever calls New owns the worker goroutine and stops it with
// Close, which waits for it.
package twin
