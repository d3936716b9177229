package pal

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"herd/algo"
	"herd/env"
	"herd/weights"
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

// MeasureLearners returns f_l(x): updates/s of the executor's learner side
// with x learners (h.Runtime.LearnerMode for x > 1) on one replay
// pre-filled by an actor, running for about d. In place of actors a feeder
// commits env steps (no env, no transitions) as fast as the rate limiter
// lets it, starting far beyond learning_starts, so the learners — and for
// x > 1 the parameter service, which applies every gradient — are the
// bottleneck: the throughput herd tune fits.
func MeasureLearners(ctx context.Context, h algo.Header, spec algo.Spec, cfg algo.Config, x int, d time.Duration) (float64, error) {
	if x < 1 || x > MaxLearners {
		return 0, fmt.Errorf("%w: %d learners", ErrConfig, x)
	}
	mode := h.Runtime.LearnerMode
	if mode == "" {
		mode = ModeAsync
	}
	if mode != ModeAsync && mode != ModeSync {
		return 0, fmt.Errorf("%w: learner_mode %q", ErrConfig, mode)
	}
	hx := h
	hx.Runtime.Learners = x
	if r := algo.Refusal(Executor(), hx, spec); r != "" {
		return 0, fmt.Errorf("%w: %s", algo.ErrConfig, r)
	}
	shape, ok := cfg.(algo.TransitionShape)
	if !ok || spec.Pieces == nil {
		return 0, algo.Undeclared(spec, algo.CanTransitionLearner, "its config has no transition shape or it has no pieces")
	}
	numEnvs, _ := shape.TransitionShape()
	vec, err := h.Envs.MakeVector(h.Env, numEnvs, env.Sync, env.WithEpisodeStatistics())
	if err != nil {
		return 0, err
	}
	defer vec.Close()
	pieces, err := spec.Pieces(h, cfg, algo.SpacesOf(vec))
	if err != nil {
		return 0, err
	}
	if pieces.NewTransitionLearner == nil {
		return 0, algo.Undeclared(spec, algo.CanTransitionLearner, "its pieces have no transition learner")
	}
	rb, err := pieces.NewReplay()
	if err != nil {
		return 0, err
	}
	fork, ok := rb.(algo.ForkReplay)
	if !ok {
		return 0, algo.Undeclared(spec, algo.CanTransitionLearner, "its replay cannot be shared between goroutines (algo.ForkReplay)")
	}
	// Fill: a few thousand random-policy steps suffice for speed.
	const fill = 4096
	a, err := newActor(0, h.Seed, vec, pieces, fork.Fork(), nil, 1<<62)
	if err != nil {
		return 0, err
	}
	total := int64(fill/numEnvs) * int64(numEnvs)
	if err := a.start(); err != nil {
		return 0, err
	}
	if err := a.run(ctx, newLimiter(total, 1, true), algo.Discard()); err != nil {
		return 0, err
	}
	learner, err := pieces.NewTransitionLearner()
	if err != nil {
		return 0, err
	}
	defer learner.Close()
	store := weights.NewStore(learner.Weights())
	// Steps start far beyond any learning_starts, so every step is due its
	// updates.
	const start = int64(1) << 40
	maxLag := int64(max(DefaultMaxLag, numEnvs))
	lim := newLimiter(start+(1<<50), maxLag, false)
	lim.reserved, lim.committed, lim.consumed = start, start, start
	var svc *service
	if x > 1 {
		split, ok := learner.(algo.SplitLearner)
		if !ok {
			return 0, algo.Undeclared(spec, algo.CanGradApply, "its learner is no algo.SplitLearner")
		}
		opt := Options{Learners: x, LearnerMode: mode, SyncBatch: h.Runtime.SyncBatch, PublishEvery: 1}
		wp, err := workerPieces(h, spec, cfg, algo.SpacesOf(vec), pieces, opt)
		if err != nil {
			return 0, err
		}
		if svc, err = newService(lim, split, wp, fork, fork.Fork(), store, opt, algo.Discard()); err != nil {
			return 0, err
		}
		defer svc.close()
		svc.res.last = start
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	stop := context.AfterFunc(ctx, lim.wake)
	defer stop()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the feeder
		defer wg.Done()
		chunk := int64(numEnvs)
		for {
			if _, ok := lim.reserve(chunk); !ok {
				return
			}
			lim.commit(chunk)
		}
	}()
	t0 := time.Now()
	var res learnResult
	if svc != nil {
		res = svc.run(ctx)
	} else {
		res = newLearnLoop(lim, learner, fork.Fork(), store, 1, algo.Discard(), nil, start, 0).run(ctx)
	}
	wall := time.Since(t0)
	lim.wake()
	wg.Wait()
	if res.err != nil && !errors.Is(res.err, context.DeadlineExceeded) {
		return 0, res.err
	}
	updates := learner.Weights().N
	if updates == 0 {
		return 0, fmt.Errorf("pal: %d learners made no update in %v", x, d)
	}
	return float64(updates) / wall.Seconds(), nil
}

// MeasureJoint returns the env steps/s of a whole PAL run of h.Steps env
// steps with the given counts (learning_starts included), from its first
// env step to its last update: the joint throughput that herd tune
// measures for allocations its model cannot tell apart.
func MeasureJoint(ctx context.Context, h algo.Header, spec algo.Spec, cfg algo.Config, actors, learners int) (float64, error) {
	var st Stats
	opt := OptionsOf(h)
	opt.Actors, opt.Learners, opt.Stats = actors, learners, &st
	if _, err := Train(ctx, &algo.Runtime{Header: h, Log: algo.Discard()}, spec, cfg, opt); err != nil {
		return 0, err
	}
	if st.EnvSteps == 0 || st.Wall <= 0 {
		return 0, fmt.Errorf("pal: (%d actors, %d learners) took no env step", actors, learners)
	}
	return float64(st.EnvSteps) / st.Wall.Seconds(), nil
}
