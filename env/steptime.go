package env

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"herd/internal/rng"
)

// StepTime describes how long each Step of a WithStepTime env takes: a
// duration drawn afresh every step from a distribution with the given mean
// and coefficient of variation (std / mean), as the step times of real
// simulators vary (physics substeps, rendering, contact solving).
type StepTime struct {
	// Mean step time (> 0).
	Mean time.Duration `yaml:"mean"`
	// CV is the coefficient of variation (≥ 0; 0 = every step takes Mean).
	CV float64 `yaml:"cv"`
	// Dist is "lognormal" (default) or "gamma".
	Dist string `yaml:"dist,omitempty"`
	// TailProb and TailFactor add a heavy tail: with probability TailProb
	// a step takes TailFactor times its draw (a stall). 0 = no tail.
	TailProb   float64 `yaml:"tail_prob,omitempty"`
	TailFactor float64 `yaml:"tail_factor,omitempty"`
}

// Bounds of a StepTime: it models a simulator's step, so a mean beyond a
// minute or a CV beyond 10 is a mistake, not a simulator, and within them
// every draw is a finite duration (no overflow to a zero or negative sleep).
const (
	MaxStepTimeMean       = time.Minute
	MaxStepTimeCV         = 10
	MaxStepTimeTailFactor = 1000
	// maxStepDraw caps one draw (a tail factor times an extreme draw),
	// so that the float never overflows the Duration it becomes.
	maxStepDraw = 24 * time.Hour
)

// Validate reports an unusable StepTime.
func (s StepTime) Validate() error {
	switch {
	case s.Mean <= 0 || s.Mean > MaxStepTimeMean:
		return fmt.Errorf("%w: step time mean %v, want in (0, %v]", ErrInvalidOption, s.Mean, MaxStepTimeMean)
	case !(s.CV >= 0 && s.CV <= MaxStepTimeCV):
		return fmt.Errorf("%w: step time cv %v, want in [0, %v]", ErrInvalidOption, s.CV, MaxStepTimeCV)
	case s.Dist != "" && s.Dist != "lognormal" && s.Dist != "gamma":
		return fmt.Errorf("%w: step time dist %q, want lognormal or gamma", ErrInvalidOption, s.Dist)
	case !(s.TailProb >= 0 && s.TailProb <= 1):
		return fmt.Errorf("%w: step time tail_prob %v, want in [0, 1]", ErrInvalidOption, s.TailProb)
	case s.TailFactor != 0 && !(s.TailFactor >= 1 && s.TailFactor <= MaxStepTimeTailFactor),
		s.TailProb > 0 && s.TailFactor == 0:
		return fmt.Errorf("%w: step time tail_factor %v, want in [1, %v]", ErrInvalidOption, s.TailFactor, MaxStepTimeTailFactor)
	}
	return nil
}

// Draw returns one step time drawn from r.
func (s StepTime) Draw(r *rand.Rand) time.Duration {
	m := float64(s.Mean)
	x := m
	if s.CV > 0 {
		if s.Dist == "gamma" {
			// Gamma with shape k = 1/cv² and scale θ = mean·cv²
			// (mean kθ, variance kθ²).
			k := 1 / (s.CV * s.CV)
			x = gammaDraw(r, k) * m * s.CV * s.CV
		} else {
			// Log-normal with E[X] = mean and CV = cv: σ² = ln(1 + cv²),
			// μ = ln(mean) − σ²/2.
			s2 := math.Log1p(s.CV * s.CV)
			x = math.Exp(math.Log(m) - s2/2 + math.Sqrt(s2)*r.NormFloat64())
		}
	}
	if s.TailProb > 0 && r.Float64() < s.TailProb {
		x *= s.TailFactor
	}
	if !(x < float64(maxStepDraw)) { // also NaN: never a zero or negative sleep
		x = float64(maxStepDraw)
	}
	return time.Duration(max(x, 0))
}

// gammaDraw draws Gamma(k, 1) by Marsaglia and Tsang (2000), with the
// k < 1 boost Gamma(k) = Gamma(k+1)·U^(1/k).
func gammaDraw(r *rand.Rand, k float64) float64 {
	boost := 1.0
	if k < 1 {
		boost = math.Pow(r.Float64(), 1/k)
		k++
	}
	d := k - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		var x, v float64
		for v <= 0 {
			x = r.NormFloat64()
			v = 1 + c*x
		}
		v = v * v * v
		u := r.Float64()
		if u < 1-0.0331*x*x*x*x || math.Log(u) < 0.5*x*x+d*(1-v+math.Log(v)) {
			return d * v * boost
		}
	}
}

// StepTimer is the wrapper behind WithStepTime: each Step sleeps for a
// drawn duration, then steps the inner env. The draws come from the
// wrapper's own stream, reseeded from each seeded Reset (role
// "env/step-time"), so timing is reproducible and never touches the
// dynamics or their random stream: results are the same with or without
// the wrapper. Sleeping parks the goroutine, so a slow env costs no CPU.
type StepTimer struct {
	inner Env
	st    StepTime
	r     *rand.Rand
	slept time.Duration
}

// NewStepTimer wraps e.
func NewStepTimer(e Env, st StepTime) (*StepTimer, error) {
	if err := st.Validate(); err != nil {
		return nil, err
	}
	return &StepTimer{inner: e, st: st, r: rng.New(0, "env/step-time", 0)}, nil
}

func (s *StepTimer) ObservationSpace() Space { return s.inner.ObservationSpace() }
func (s *StepTimer) ActionSpace() Space      { return s.inner.ActionSpace() }
func (s *StepTimer) Close() error            { return s.inner.Close() }
func (s *StepTimer) Unwrap() Env             { return s.inner }

// Slept is the total time this env was asked to sleep in Step.
func (s *StepTimer) Slept() time.Duration { return s.slept }

// Reset reseeds the step-time stream from seed (unless NoSeed) and resets
// the inner env.
func (s *StepTimer) Reset(seed int64) ([]float32, Info, error) {
	if seed != NoSeed {
		s.r = rng.New(uint64(seed), "env/step-time", 0)
	}
	return s.inner.Reset(seed)
}

// Step sleeps for a drawn step time, then steps the inner env.
func (s *StepTimer) Step(action []float32) ([]float32, float64, bool, bool, Info, error) {
	d := s.st.Draw(s.r)
	s.slept += d
	time.Sleep(d)
	return s.inner.Step(action)
}
