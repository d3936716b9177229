package offpolicy

// LinearSchedule is CleanRL's linear_schedule (dqn.py): the value moves in a
// straight line from start at t = 0 to end at t = duration and then stays at
// end:
//
//	v(t) = start + (end − start) · min(t / duration, 1)
//
// DQN uses it for ε (1 → 0.05 over half the run). A duration ≤ 0 means the
// schedule is already finished and returns end.
func LinearSchedule(start, end float64, duration, t int) float64 {
	if duration <= 0 || t >= duration {
		return end
	}
	if t <= 0 {
		return start
	}
	return start + (end-start)*float64(t)/float64(duration)
}

// Crossed reports whether a multiple of every lies in (prev, cur]. With N
// environments the global step advances by N per iteration, and a period
// counted in global steps (train every 10 steps, update the target every
// 500) must fire once for each multiple it passes, whatever N is.
func Crossed(prev, cur, every int64) bool { return every > 0 && cur/every > prev/every }

// Crossings counts the multiples of every in (prev, cur]: how many times a
// period counted in global steps fires when the step moves from prev to
// cur (several times when N envs step past several multiples at once).
func Crossings(prev, cur, every int64) int64 {
	if every <= 0 || cur <= prev {
		return 0
	}
	return cur/every - prev/every
}
