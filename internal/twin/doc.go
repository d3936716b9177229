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
//
// # Waiting on shared cores
//
// The rule: no goroutine waits by holding a core for more than a few microseconds unless it has
// evidence that the core is its own, and no goroutine ever waits for work that has not started.
// Shared cores are the normal case: a laptop running other programs, a CI box, and by design the
// executors still to come (PAL, HTS, distributed workers), which run more goroutines and processes
// than there are cores.
//
// Why: a poller that waits for a partner whose OS thread is descheduled burns its own time slice
// and then waits a whole slice (milliseconds) more, so a 20 µs hand-off costs milliseconds. A Pair
// that polled 200 µs on each side, with two busy-loop processes on the two cores, took 25 s for
// DQN CartPole 100k on both cores and 3.7 s pinned to one (docs/BENCHMARKS.md).
// Parking at once is no answer either: on this VM waking a parked goroutine costs about as
// much as a 20 µs pass, which is why the hand-off polls.
//
// How (`internal/twin`, its package doc has the details):
//
//   - The caller takes unclaimed work back. The worker claims a job (compare-and-swap) before it
//     runs it; in `Wait` the caller runs any job still unclaimed itself. It only ever waits for a job
//     that is running. Results are the same either way, because a job computes the same thing on
//     any goroutine.
//   - Polling is earned. While no poll has seen its own thread descheduled (two polls more than
//     50 µs apart) in the last epoch of 32 hand-offs, or the worker saved at least a tenth of the
//     epoch's time anyway, each side polls up to `MaxSpin` (100 µs,
//     covering the gap between two training steps), so an idle machine keeps the old speed. After
//     such an epoch the budget is `MinSpin` (2 µs), then the side parks.
//   - The worker stays only while it saves time. Each hand-off the worker ran saved the job's
//     duration (capped at twice the usual: a worker descheduled mid-job reports its idle time too)
//     minus the caller's wait; a job taken back saved nothing. An epoch that saves under 1/8 of what
//     the caller alone would have spent, or loses more than 500 µs (which ends it at once), sends the
//     Pair solo: the caller runs both halves for a backoff (1 ms, doubling to 512 ms while the
//     one-epoch probes after it keep failing, halving when one passes) and the worker stays parked.
//     Solo costs what one goroutine costs, about what `taskset -c 0` gives. An earlier version
//     counted late claims as contention; on this VM an idle polling worker misses a few percent of
//     claims by microseconds, and the count sent DQN solo on a quiet machine (1.55x slower than
//     before). Measured savings have no such threshold to tune.
//   - Each algorithm has `parallel: false` (PPO, A2C, DQN, SAC, TD3, DDPG) to run everything on the
//     calling goroutine. With GOMAXPROCS = 1 there is no worker at all. AsyncVector's workers are
//     Pairs too, so they follow the same rules.
//   - The replay stripe lock (`replay/storage.go`) polls, then yields 16 times, then parks in
//     `Lock`. Unbounded yielding is polling whenever nothing else is runnable. The rate limiter
//     already waits on channels.
//
// `herd bench learn --load N --pin all --pin 0` measures this, and `scripts/bench-shared-cores.sh`
// reproduces the recorded table.
package twin
