// Package twin runs two independent halves of a training step at once —
// the caller's goroutine one, a worker goroutine the other — so that
// training uses both cores of a small machine: PPO's actor and critic
// passes, DQN's online and target forwards, the twin critics of SAC and
// TD3, AsyncVector's blocks of envs.
//
// The hand-off is what matters at this grain. The halves are tens of
// microseconds (one MLP pass at batch 128), and waking a parked goroutine
// whose processor has gone idle costs about as much on a virtual machine.
// So on a quiet machine the worker, after a job, polls for the next one
// for up to MaxSpin before it parks, and the caller polls for the result;
// while jobs come faster than that, as in a training loop, neither parks.
//
// Polling is only right while each side has a core to itself. When the
// cores are shared (other processes, more goroutines than processors) a
// side's thread can be descheduled for a whole scheduler slice
// (milliseconds), and a partner that polls for it, or waits for a job it
// has not even started, turns a 20 µs step into milliseconds — herd was
// 4–7x slower on two shared cores than pinned to one. Three rules keep a
// Pair from losing there:
//
//   - The caller never waits for a job the worker has not claimed: in Wait
//     it takes an unclaimed job back and runs it itself. Only a job the
//     worker is running is waited for.
//   - The Pair judges every hand-off, and counts as bad a job the worker
//     should have claimed and did not (a miss), a wait far longer than
//     jobs take (the worker was descheduled mid-job), and any poll that
//     saw its own thread descheduled. After one bad hand-off both sides
//     poll MinSpin (a few microseconds), then park.
//   - When bad hand-offs keep coming (a moving average above ~30%), the
//     Pair goes solo: the caller runs both halves itself, the worker
//     stays parked, for a backoff of 1 ms that doubles (to 128 ms) while
//     the probes that follow keep failing. A solo Pair costs what one
//     goroutine costs, which is what the same run pinned to one core
//     costs.
//
// Results never depend on the Pair: each half touches its own memory and is
// computed by one goroutine in a fixed order, whichever goroutine that is
// (the worker, or the caller when it takes a job back or runs solo). The
// halves must therefore not wait on each other.
//
// With GOMAXPROCS = 1 polling could only steal time from the other half,
// so New returns a nil Pair, whose methods run everything on the caller's
// goroutine; NewWorker (jobs that may block) starts a worker that never
// polls. NewIf(false) is the nil Pair too: an algorithm's parallel: false.
//
// Ownership: whoever calls New owns the worker goroutine and stops it with
// Close, which waits for it.
package twin
