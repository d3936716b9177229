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
//   - The Pair keeps the worker only while it pays, measured in time, not
//     guessed from symptoms. For each hand-off the worker ran, the saving
//     is the job's duration (capped at twice the usual, since a worker
//     descheduled mid-job also reports the time it lay idle) minus the
//     time the caller waited for it; a job taken back saves nothing. Over
//     an epoch of 32 hand-offs, savings under 1/8 of what the caller alone
//     would have spent — or a loss over 500 µs, which ends the epoch at
//     once — send the Pair solo: the caller runs both halves, the worker
//     stays parked, for a backoff of 1 ms that doubles (to 512 ms) while
//     the one-epoch probes that follow keep failing, and halves when one
//     passes. A solo Pair costs what one goroutine costs, which is what
//     the same run pinned to one core costs.
//   - After an epoch in which either side's poll saw its own thread
//     descheduled and the worker saved less than a tenth, both sides poll
//     only MinSpin (a few microseconds) before they park. An epoch that
//     saved more keeps the long poll: a little other load makes
//     descheduled polls common, and a parked worker turns every hand-off
//     into a wake-up.
//
// An earlier version counted late claims ("misses") as signs of
// contention. On a virtual machine a worker polling on an idle core still
// misses a few percent of hand-offs by microseconds, which cost nothing
// (the caller runs the job), yet the count sent the Pair solo for most of
// a DQN run on a quiet machine (1.55x slower). Judging by time saved has
// no such threshold to tune: a miss is simply a hand-off that saved
// nothing.
//
// Why 1/8 and not just "any saving": a job the caller takes back after
// the worker was woken for it saves nothing but still costs a wake-up,
// and under contention an epoch of mostly taken-back jobs with a few
// overlapped ones shows a small positive saving while the worker's
// wake-ups and polls take CPU share from the caller. With two busy-loop
// processes on two cores, a 2% threshold kept DQN paired at 1.25–1.37x
// the pinned time; 1/8 sends it solo (0.98–1.04x), and on an idle
// machine the overlapped halves save far more than 1/8.
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
