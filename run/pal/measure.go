package pal

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"herd/algo"
	"herd/env"
)

// MeasureActors returns f_a(x): env steps/s of x actors running free (no
// learner, no rate limiter) for about d, the throughput herd tune fits.
func MeasureActors(ctx context.Context, h algo.Header, spec algo.Spec, cfg algo.Config, x int, d time.Duration) (float64, error) {
	h.Steps = 1 << 50 // stopped by the deadline
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var st Stats
	_, err := Train(ctx, &algo.Runtime{Header: h, Log: algo.Discard()}, spec, cfg, Options{Actors: x, NoLearn: true, Stats: &st})
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return 0, err
	}
	if st.EnvSteps == 0 || st.Wall <= 0 {
		return 0, fmt.Errorf("pal: %d actors took no env step in %v", x, d)
	}
	return float64(st.EnvSteps) / st.Wall.Seconds(), nil
}

// MeasureLearners returns f_l(x): updates/s of x learners, each with its
// own learner piece and its own fork of one replay pre-filled by an actor
// (learning_starts steps plus one minibatch, at most the buffer), running
// their updates side by side for about d. This is PAL's profiling run of
// concurrent learners on one buffer; the executor itself runs one learner.
func MeasureLearners(ctx context.Context, h algo.Header, spec algo.Spec, cfg algo.Config, x int, d time.Duration) (float64, error) {
	if x < 1 {
		return 0, fmt.Errorf("%w: %d learners", ErrConfig, x)
	}
	shape, ok := cfg.(algo.TransitionShape)
	if !ok || spec.Pieces == nil {
		return 0, fmt.Errorf("%w: algorithm %s has no off-policy pieces", ErrConfig, spec.Name)
	}
	numEnvs, u := shape.TransitionShape()
	vec, err := env.MakeVector(h.Env, numEnvs, env.Sync, env.WithEpisodeStatistics())
	if err != nil {
		return 0, err
	}
	defer vec.Close()
	pieces, err := spec.Pieces(h, cfg, algo.SpacesOf(vec))
	if err != nil {
		return 0, err
	}
	if pieces.NewTransitionLearner == nil {
		return 0, fmt.Errorf("%w: algorithm %s is not off-policy", ErrConfig, spec.Name)
	}
	rb, err := pieces.NewReplay()
	if err != nil {
		return 0, err
	}
	fork, ok := rb.(algo.ForkReplay)
	if !ok {
		return 0, fmt.Errorf("%w: %s's replay cannot be shared between goroutines", ErrConfig, spec.Name)
	}
	// Fill: learning starts at the step after the first full learner
	// call below; a few thousand random-policy steps suffice for speed.
	const fill = 4096
	a, err := newActor(0, h.Seed, vec, pieces, fork.Fork(), nil, 1<<62)
	if err != nil {
		return 0, err
	}
	total := int64(fill/numEnvs) * int64(numEnvs)
	if err := a.run(ctx, newLimiter(total, 1, true), algo.Discard()); err != nil {
		return 0, err
	}
	learners := make([]algo.TransitionLearner, x)
	for i := range learners {
		if learners[i], err = pieces.NewTransitionLearner(); err != nil {
			return 0, err
		}
		defer learners[i].Close()
	}
	// Each call covers chunk env steps past a start far beyond any
	// learning_starts, so every call makes updates (chunk / U of them).
	chunk := int64(max(1, 16*u))
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	errs := make([]error, x)
	var wg sync.WaitGroup
	t0 := time.Now()
	for i, l := range learners {
		rb := fork.Fork()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := int64(1 << 40); ctx.Err() == nil; s += chunk {
				if _, err := l.Learn(ctx, rb, s, s+chunk); err != nil {
					if !errors.Is(err, context.DeadlineExceeded) {
						errs[i] = err
					}
					return
				}
			}
		}()
	}
	wg.Wait()
	wall := time.Since(t0)
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	var updates uint64
	for _, l := range learners {
		updates += l.Weights().N
	}
	if updates == 0 {
		return 0, fmt.Errorf("pal: %d learners made no update in %v", x, d)
	}
	return float64(updates) / wall.Seconds(), nil
}
