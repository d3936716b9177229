package tune

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// ErrInput marks curves or counts that cannot be fitted or solved.
var ErrInput = errors.New("tune: invalid input")

// Point is one measurement: throughput Y (per second) with X workers.
type Point struct {
	X int
	Y float64
}

// Amdahl is a fitted throughput curve f(x) = F1·x / (1 + S·(x−1)).
type Amdahl struct {
	F1 float64 // throughput of one worker
	S  float64 // serial fraction in [0, 1]
}

// At returns f(x).
func (a Amdahl) At(x float64) float64 { return a.F1 * x / (1 + a.S*(x-1)) }

// Fit fits Amdahl's law to the points by least squares on relative error
// (so a curve's small and large values weigh alike): S by golden-section
// search on [0, 1], F1 in closed form for each S.
func Fit(pts []Point) (Amdahl, error) {
	if len(pts) == 0 {
		return Amdahl{}, fmt.Errorf("%w: no points", ErrInput)
	}
	for _, p := range pts {
		if p.X < 1 || !(p.Y > 0) || math.IsInf(p.Y, 0) {
			return Amdahl{}, fmt.Errorf("%w: point (%d, %v): want x ≥ 1 and a finite throughput > 0", ErrInput, p.X, p.Y)
		}
	}
	// For fixed S, f(x) = F1·g(x) with g(x) = x/(1+S(x−1)); minimising
	// Σ((F1·g − y)/y)² gives F1 = Σ(g/y) / Σ(g²/y²).
	fitF1 := func(s float64) (float64, float64) {
		var num, den float64
		for _, p := range pts {
			g := float64(p.X) / (1 + s*float64(p.X-1))
			num += g / p.Y
			den += g * g / (p.Y * p.Y)
		}
		f1 := num / den
		var loss float64
		for _, p := range pts {
			r := (f1*float64(p.X)/(1+s*float64(p.X-1)) - p.Y) / p.Y
			loss += r * r
		}
		return f1, loss
	}
	lo, hi := 0.0, 1.0
	phi := (math.Sqrt(5) - 1) / 2
	for range 100 {
		a, b := hi-phi*(hi-lo), lo+phi*(hi-lo)
		_, la := fitF1(a)
		_, lb := fitF1(b)
		if la <= lb {
			hi = b
		} else {
			lo = a
		}
	}
	s := (lo + hi) / 2
	f1, _ := fitF1(s)
	return Amdahl{F1: f1, S: s}, nil
}

// Summary reduces repeated measurements of one point (rounds that
// alternate with the other points' measurements) to their median and
// their relative spread, half their range over the median: the point's ±.
func Summary(ys []float64) (median, spread float64, err error) {
	if len(ys) == 0 {
		return 0, 0, fmt.Errorf("%w: no measurements", ErrInput)
	}
	for _, y := range ys {
		if !(y > 0) || math.IsInf(y, 0) {
			return 0, 0, fmt.Errorf("%w: measurement %v: want a finite throughput > 0", ErrInput, y)
		}
	}
	s := slices.Sorted(slices.Values(ys))
	n := len(s)
	median = s[n/2]
	if n%2 == 0 {
		median = (s[n/2-1] + s[n/2]) / 2
	}
	return median, (s[n-1] - s[0]) / (2 * median), nil
}

// Run is the run an allocation is chosen for.
type Run struct {
	// U is the env steps per learner update that the rate limiter holds.
	U float64
	// Steps is the run's length in env steps (≥ 1); WarmUp (≥ 0) is how
	// many of them come before the first update (learning_starts), when
	// the actors work and the learners have nothing to do.
	Steps, WarmUp int64
	// Tie is the relative band within which allocations count as equal:
	// those whose predicted mean rate is at least (1 − Tie) of the best
	// tie, and the fewest workers among them win. 0 means 1%; `herd tune`
	// sets it to the measurements' own spread (Band).
	Tie float64
}

func (r Run) tie() float64 {
	if r.Tie == 0 {
		return 0.01
	}
	return r.Tie
}

func (r Run) check(cores int) error {
	if cores < 2 || !(r.U > 0) || math.IsInf(r.U, 0) || r.Steps < 1 || r.WarmUp < 0 || !(r.Tie >= 0 && r.Tie < 1) {
		return fmt.Errorf("%w: cores %d (≥ 2), update interval %v (> 0), steps %d (≥ 1), warm-up %d (≥ 0), tie band %v (in [0, 1))",
			ErrInput, cores, r.U, r.Steps, r.WarmUp, r.Tie)
	}
	return nil
}

// Seconds predicts the run's wall time with actors at ar env steps/s and
// learners at lr = U·f_l env steps/s: the warm-up at the actors' rate (no
// learner work holds them), the rest at min(ar, lr), the rate limiter
// holding the faster side to the slower:
//
//	T = W / ar + (S − W) / min(ar, lr).
func (r Run) Seconds(ar, lr float64) float64 {
	w := min(r.WarmUp, r.Steps)
	return float64(w)/ar + float64(r.Steps-w)/min(ar, lr)
}

// Allocation is one choice of actor and learner counts and what the model
// predicts for it.
type Allocation struct {
	Actors, Learners int
	// ActorRate is f_a(Actors) in env steps/s, LearnerRate U·f_l(Learners)
	// in env steps/s, Rate their minimum: eq. 5's steady-state rate.
	ActorRate, LearnerRate, Rate float64
	// Seconds is the predicted wall time of the run (Run.Seconds), RunRate
	// Steps / Seconds, the run's mean env steps/s (what `herd bench learn`
	// reports). Without a warm-up RunRate is Rate.
	Seconds, RunRate float64
	// Predicted is set when a rate comes from a fitted curve rather than a
	// measurement (Search: a count beyond the measured ones).
	Predicted bool
}

func (r Run) alloc(a, l int, ar, lr float64, pred bool) Allocation {
	sec := r.Seconds(ar, lr)
	return Allocation{Actors: a, Learners: l, ActorRate: ar, LearnerRate: lr, Rate: min(ar, lr),
		Seconds: sec, RunRate: float64(r.Steps) / sec, Predicted: pred}
}

// Search solves PAL's eq. 5 on the measurements, by exhaustive search as
// the paper does (§V-D, §VI-F): every allocation with x_a, x_l ≥ 1 and
// x_a + x_l ≤ cores, with f_a and f_l the measured points (actors in env
// steps/s, learners in updates/s), best first. It ranks by the run's
// predicted wall time (Run.Seconds: the warm-up at f_a(x_a), the rest at
// eq. 5's R = min(f_a(x_a), U·f_l(x_l))), shortest first, ties as Choose;
// without a warm-up that is R's order. Measured curves may fall as x grows
// (cores run out), which no fit of Amdahl's law can follow, so the fits fa
// and fl are used only for counts beyond the largest measured one, and
// such allocations are marked Predicted. Counts from 1 to the largest
// measured one must all be measured.
func Search(actors, learners []Point, fa, fl Amdahl, run Run, cores int) ([]Allocation, error) {
	if err := run.check(cores); err != nil {
		return nil, err
	}
	curve := func(name string, pts []Point) (map[int]float64, int, error) {
		m := map[int]float64{}
		top := 0
		for _, p := range pts {
			if p.X < 1 || !(p.Y > 0) || math.IsInf(p.Y, 0) {
				return nil, 0, fmt.Errorf("%w: %s point (%d, %v): want x ≥ 1 and a finite throughput > 0", ErrInput, name, p.X, p.Y)
			}
			if _, dup := m[p.X]; dup {
				return nil, 0, fmt.Errorf("%w: %s measured twice at x = %d", ErrInput, name, p.X)
			}
			m[p.X] = p.Y
			top = max(top, p.X)
		}
		for x := 1; x <= top; x++ {
			if _, ok := m[x]; !ok {
				return nil, 0, fmt.Errorf("%w: %s not measured at x = %d (below the largest measured %d)", ErrInput, name, x, top)
			}
		}
		if top == 0 {
			return nil, 0, fmt.Errorf("%w: no %s points", ErrInput, name)
		}
		return m, top, nil
	}
	ma, topA, err := curve("actor", actors)
	if err != nil {
		return nil, err
	}
	ml, topL, err := curve("learner", learners)
	if err != nil {
		return nil, err
	}
	var all []Allocation
	for a := 1; a < cores; a++ {
		for l := 1; a+l <= cores; l++ {
			ar, lr := ma[a], run.U*ml[l]
			pred := false
			if a > topA {
				ar, pred = fa.At(float64(a)), true
			}
			if l > topL {
				lr, pred = run.U*fl.At(float64(l)), true
			}
			all = append(all, run.alloc(a, l, ar, lr, pred))
		}
	}
	rank(all, run.tie())
	return all, nil
}

// Choose returns every allocation with x_a, x_l ≥ 1 and x_a + x_l ≤ cores,
// best first, for fitted actors fa (env steps/s) and learners fl
// (updates/s): the model alone, every rate a prediction. `herd tune`
// decides with Search, on the measurements.
func Choose(fa, fl Amdahl, run Run, cores int) ([]Allocation, error) {
	if err := run.check(cores); err != nil {
		return nil, err
	}
	var all []Allocation
	for a := 1; a < cores; a++ {
		for l := 1; a+l <= cores; l++ {
			all = append(all, run.alloc(a, l, fa.At(float64(a)), run.U*fl.At(float64(l)), false))
		}
	}
	rank(all, run.tie())
	return all, nil
}

// Tied returns the measured allocations of a ranked list (Search) whose
// predicted run rate is within the tie band of the best one's: those the
// model cannot tell apart, in the list's order.
func Tied(allocs []Allocation, run Run) []Allocation {
	var best float64
	for _, a := range allocs {
		if !a.Predicted {
			best = max(best, a.RunRate)
		}
	}
	var tied []Allocation
	for _, a := range allocs {
		if !a.Predicted && a.RunRate >= (1-run.tie())*best {
			tied = append(tied, a)
		}
	}
	return tied
}

// rank sorts allocations best first: by predicted run time, except that
// among those within the tie band of the best (RunRate ≥ (1 − tie) of the
// best's) the one with the fewest workers comes first.
func rank(all []Allocation, tie float64) {
	best := slices.MaxFunc(all, func(x, y Allocation) int { return cmpF(x.RunRate, y.RunRate) })
	slices.SortStableFunc(all, func(x, y Allocation) int {
		xn, yn := x.RunRate >= (1-tie)*best.RunRate, y.RunRate >= (1-tie)*best.RunRate
		switch {
		case xn && yn:
			if c := (x.Actors + x.Learners) - (y.Actors + y.Learners); c != 0 {
				return c
			}
			return cmpF(y.RunRate, x.RunRate)
		case xn:
			return -1
		case yn:
			return 1
		}
		return cmpF(y.RunRate, x.RunRate)
	})
}

func cmpF(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
