package worker_test

import (
	"bytes"
	"context"
	"errors"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"herd/algo"
	"herd/algo/all"
	"herd/env"
	"herd/sample"
	"herd/transport"
	"herd/weights"
	"herd/worker"
)

// segmentsInline runs one inline env worker for segs segments against a
// parameter service that holds only the learner's initial weights (the
// synchronous case) and returns the encoded segments it pushed, with the
// envs and config of segmentsWithGroups.
func segmentsInline(t *testing.T, segs int) [][]byte {
	t.Helper()
	pieces, opt := ppoPieces(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	params := initialParams(ctx, t, transport.NewInproc(), "inline", opt, pieces)
	envs := make([]env.Env, 4)
	for j := range envs {
		e, err := env.Make("CartPole-v1", env.WithEpisodeStatistics(), env.WithMaxEpisodeSteps(9))
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		envs[j] = e
	}
	smp := &collect{}
	// No learner makes version 1, so the wait before each segment after
	// the first runs out (briefly here), and each is counted.
	var stale uint64
	cfg := worker.EnvConfig{Slot: 1, Seed: 5, Envs: envs, Steps: 16, Gamma: 0.99, Segments: segs,
		Timeouts: worker.Timeouts{Weights: 20 * time.Millisecond}, OnPushed: func(p transport.Progress) { stale = p.FetchFailed }}
	if err := worker.RunEnvInline(ctx, cfg, pieces, params, smp); err != nil {
		t.Fatal(err)
	}
	if stale != uint64(segs-1) {
		t.Errorf("%d segments started on old weights, want %d (all but the first)", stale, segs-1)
	}
	return smp.got
}

// With the weights of one version, an inline env worker pushes exactly the
// segments an env worker served by a policy worker does: the same forward
// pass, the same sampler stream (seed, "env-worker", slot), the same
// truncation bootstraps and versions.
func TestInlineMatchesPolicyWorker(t *testing.T) {
	const segs = 3
	want := segmentsWithGroups(t, 1, segs)
	got := segmentsInline(t, segs)
	if len(got) != segs || len(want) != segs {
		t.Fatalf("pushed %d inline and %d served segments, want %d", len(got), len(want), segs)
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			t.Errorf("segment %d differs between inline and policy-worker inference", i)
		}
	}
}

// lockstep is a parameter service whose Latest, called by an inline env
// worker once per segment, waits for version k before the worker's k-th
// segment (counting from 0): the learner has learned every segment before
// it, so the run is synchronous and its results depend on the seed only.
type lockstep struct {
	transport.ParamService
	ctx context.Context
	k   uint64
}

func (l *lockstep) Latest() *weights.Version {
	v, err := l.ParamService.Wait(l.ctx, l.k)
	if err != nil {
		return nil
	}
	l.k++
	return v
}

// inlinePPO trains PPO on CartPole with one inline env worker (4 envs ×
// 128 steps per segment) in lockstep with the learner for iters segments
// and returns the learner's final weights, encoded, and the episodes'
// returns in order.
func inlinePPO(t *testing.T, iters int) ([]byte, []float64) {
	t.Helper()
	res, err := algo.Resolve([]byte("algo: ppo\nenv: CartPole-v1\nseed: 7\nsteps: 51200\nruntime: {executor: dist, inference: inline}\n"+
		"ppo: {num_envs: 4, num_steps: 128, learning_rate: 1.0e-3}\n"), all.Specs(), algo.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	probe, err := env.Make("CartPole-v1")
	if err != nil {
		t.Fatal(err)
	}
	pieces, err := res.Spec.Pieces(res.Header, res.Config, algo.SpacesOf(probe))
	probe.Close()
	if err != nil {
		t.Fatal(err)
	}
	p0, err := pieces.NewPolicy()
	if err != nil {
		t.Fatal(err)
	}
	l0, err := pieces.NewSegmentLearner()
	if err != nil {
		t.Fatal(err)
	}
	v0 := l0.Weights()
	opt := transport.Options{ObsDim: 4, OutDim: p0.OutDim(), Capacity: 2}
	for i := range v0.Len() {
		opt.Like = append(opt.Like, v0.Param(i))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	ip := transport.NewInproc()
	smp, err := ip.Samples(ctx, "ppo", opt)
	if err != nil {
		t.Fatal(err)
	}
	defer smp.Close()
	params, err := ip.Params(ctx, "ppo", opt)
	if err != nil {
		t.Fatal(err)
	}
	defer params.Close()
	envs := make([]env.Env, 4)
	for j := range envs {
		e, err := env.Make("CartPole-v1", env.WithEpisodeStatistics())
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		envs[j] = e
	}
	wctx, stop := context.WithCancel(ctx)
	envDone := make(chan error, 1)
	go func() {
		envDone <- worker.RunEnvInline(wctx, worker.EnvConfig{Slot: 0, Seed: res.Header.Seed, Envs: envs, Steps: 128, Gamma: 0.99},
			pieces, &lockstep{ParamService: params, ctx: wctx}, smp)
	}()
	var returns []float64
	var cnt worker.Counters
	l, err := worker.RunLearner(ctx, worker.LearnerConfig{Iterations: iters, Counters: &cnt,
		OnIteration: func(_ int, seg *sample.Segment, _ []algo.Stat) {
			for _, e := range seg.Episodes {
				returns = append(returns, e.Return)
			}
		}}, pieces, smp, params)
	stop()
	if eerr := <-envDone; eerr != nil && !errors.Is(eerr, context.Canceled) {
		t.Errorf("env worker: %v", eerr)
	}
	if err != nil {
		t.Fatal(err)
	}
	// In lockstep every segment acts on the version just before the
	// learner's: no step lags.
	if cnt.LagMax != 0 || cnt.Learned != uint64(iters) {
		t.Errorf("lockstep: lag max %d, learned %d; want 0 and %d", cnt.LagMax, cnt.Learned, iters)
	}
	b, err := l.Weights().Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b, returns
}

// An on-policy run with inline inference learns CartPole, and in lockstep
// (each segment acts on the weights learned from every segment before it)
// the same seed gives the same weights, bit for bit, and the same episodes.
func TestInlinePPOLearnsDeterministically(t *testing.T) {
	if testing.Short() {
		t.Skip("trains PPO twice")
	}
	const iters = 60
	w1, r1 := inlinePPO(t, iters)
	w2, r2 := inlinePPO(t, iters)
	if !bytes.Equal(w1, w2) {
		t.Error("two runs with the same seed ended with different weights")
	}
	if len(r1) != len(r2) {
		t.Fatalf("episodes: %d and %d", len(r1), len(r2))
	}
	for i := range r1 {
		if r1[i] != r2[i] {
			t.Fatalf("episode %d: returns %v and %v", i, r1[i], r2[i])
		}
	}
	mean := func(r []float64) float64 {
		s := 0.0
		for _, x := range r {
			s += x
		}
		return s / float64(len(r))
	}
	first, last := mean(r1[:20]), mean(r1[len(r1)-20:])
	t.Logf("%d episodes; mean return of the first 20 %.1f, of the last 20 %.1f", len(r1), first, last)
	if math.IsNaN(last) || last < 100 {
		t.Errorf("mean return of the last 20 episodes %.1f after %d steps, want ≥ 100", last, iters*512)
	}
}

// Inline inference refuses env groups (there is no request to overlap)
// and a missing parameter service, with errors instead of a hang.
func TestInlineConfigErrors(t *testing.T) {
	pieces, opt := ppoPieces(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	params, err := transport.NewInproc().Params(ctx, "bad", opt)
	if err != nil {
		t.Fatal(err)
	}
	defer params.Close()
	e, err := env.Make("CartPole-v1")
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	envs := []env.Env{e, e}
	cfg := worker.EnvConfig{Envs: envs, Steps: 4, Groups: 2}
	if err := worker.RunEnvInline(ctx, cfg, pieces, params, &collect{}); !errors.Is(err, worker.ErrGroups) {
		t.Errorf("inline with 2 env groups: %v, want ErrGroups", err)
	}
	cfg.Groups = 0
	if err := worker.RunEnvInline(ctx, cfg, pieces, nil, &collect{}); err == nil {
		t.Error("inline without a parameter service: no error")
	}
	if err := worker.RunEnv(ctx, cfg, pieces, nil, &collect{}); err == nil {
		t.Error("policy-worker inference without an inference stream: no error")
	}
}

// slowLearner makes the learner the bottleneck, as PPO's is under herd
// launch: env workers gather a segment much faster than it learns one.
type slowLearner struct {
	algo.SegmentLearner
	d time.Duration
}

func (l slowLearner) Learn(ctx context.Context, seg *sample.Segment) ([]algo.Stat, error) {
	time.Sleep(l.d)
	return l.SegmentLearner.Learn(ctx, seg)
}

// inlineLag runs envWorkers inline env workers against a learner that
// takes learn per segment, over the on-policy topology's sample stream (no
// queue), for iters segments, and returns the learner's counters and the
// segments the workers started on old weights.
func inlineLag(t *testing.T, envWorkers, iters int, learn time.Duration, lateAck bool) (worker.Counters, uint64) {
	return inlineLagPaused(t, envWorkers, 0, iters, learn, lateAck)
}

// inlineLagPaused is inlineLag with the last `paused` env workers' envs
// stuck in their first step, as a SIGSTOPped worker's are.
func inlineLagPaused(t *testing.T, envWorkers, paused, iters int, learn time.Duration, lateAck bool) (worker.Counters, uint64) {
	t.Helper()
	pieces, opt := ppoPieces(t)
	newLearner := pieces.NewSegmentLearner
	pieces.NewSegmentLearner = func() (algo.SegmentLearner, error) {
		l, err := newLearner()
		return slowLearner{l, learn}, err
	}
	l0, err := newLearner()
	if err != nil {
		t.Fatal(err)
	}
	v0 := l0.Weights()
	for i := range v0.Len() {
		opt.Like = append(opt.Like, v0.Param(i))
	}
	opt.Capacity = transport.NoQueue
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ip := transport.NewInproc()
	smp, err := ip.Samples(ctx, "lag", opt)
	if err != nil {
		t.Fatal(err)
	}
	defer smp.Close()
	params, err := ip.Params(ctx, "lag", opt)
	if err != nil {
		t.Fatal(err)
	}
	defer params.Close()
	wctx, stop := context.WithCancel(ctx)
	errs := make(chan error, envWorkers)
	var stale atomic.Uint64
	for w := range envWorkers {
		envs := make([]env.Env, 4)
		for j := range envs {
			e, err := env.Make("CartPole-v1", env.WithEpisodeStatistics())
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			envs[j] = e
			if w >= envWorkers-paused {
				envs[j] = stuckEnv{e, wctx}
			}
		}
		var last uint64
		cfg := worker.EnvConfig{Slot: w, Seed: 9, Envs: envs, Steps: 16, Gamma: 0.99, Peers: envWorkers,
			OnPushed: func(p transport.Progress) { stale.Add(p.FetchFailed - last); last = p.FetchFailed }}
		var push transport.SampleStream = smp
		if lateAck {
			push = lateAcks{smp, params}
			cfg.Timeouts.Weights = 5 * time.Second
		}
		go func() { errs <- worker.RunEnvInline(wctx, cfg, pieces, params, push) }()
	}
	var cnt worker.Counters
	_, err = worker.RunLearner(ctx, worker.LearnerConfig{Iterations: iters, Counters: &cnt}, pieces, smp, params)
	stop()
	for range envWorkers {
		if werr := <-errs; werr != nil && !errors.Is(werr, context.Canceled) {
			t.Errorf("env worker: %v", werr)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	return cnt, stale.Load()
}

// stuckEnv's Step blocks until its context ends: a paused process's env.
type stuckEnv struct {
	env.Env
	ctx context.Context
}

func (e stuckEnv) Step(a []float32) ([]float32, float64, bool, bool, env.Info, error) {
	<-e.ctx.Done()
	return nil, 0, false, false, env.Info{}, e.ctx.Err()
}

// One of two inline env workers paused: the other goes on at full speed,
// never waiting for a version only the paused worker's segment could
// make — also when it learns of the learner's next version before its
// push returns (late acknowledgements), where it used to wait out the
// weights timeout before every segment.
func TestInlinePausedPeerDoesNotStall(t *testing.T) {
	const iters = 8
	start := time.Now()
	cnt, stale := inlineLagPaused(t, 2, 1, iters, 5*time.Millisecond, true)
	if stale != 0 || cnt.Learned != iters {
		t.Errorf("learned %d, stale starts %d; want %d and 0", cnt.Learned, stale, iters)
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Errorf("%d segments took %v beside a paused peer", iters, d)
	}
}

// An inline env worker starts a segment only on the version the learner
// makes from its previous one, and the learner keeps no queue, so with a
// learner slower than the env workers a segment waits behind the other
// workers' segments only: lag ≤ env workers − 1 (queued segments and
// acting at once gave a mean of 2.9 for 2 env workers). One env worker
// never waits for a version that needs a segment it does not send.
func TestInlineLagBound(t *testing.T) {
	const iters = 40
	for _, e := range []int{1, 2, 3} {
		cnt, stale := inlineLag(t, e, iters, 15*time.Millisecond, false)
		t.Logf("%d env workers: lag mean %.2f, max %d; learned %d, dropped %d; stale starts %d", e, cnt.LagMean(), cnt.LagMax, cnt.Learned, cnt.Dropped, stale)
		// A goroutine descheduled while it gathers (a loaded machine) can
		// add one to many segments' lag, so the mean carries slack; the
		// queueing this guards against gave 2.9 for 2 env workers.
		if want := float64(e-1) + 0.75; cnt.LagMean() > want {
			t.Errorf("%d env workers: mean lag %.2f, want ≤ %.2f", e, cnt.LagMean(), want)
		}
		if cnt.Learned != iters || stale != 0 {
			t.Errorf("%d env workers: learned %d, stale starts %d; want %d and 0", e, cnt.Learned, stale, iters)
		}
	}
}

// lateAcks returns from a push only after the learner has learned the
// sample, as a pusher descheduled between its ack and its next step sees
// it: the newest version it then knows is already the one made from its
// segment.
type lateAcks struct {
	transport.SampleStream
	params transport.ParamService
}

func (l lateAcks) Push(ctx context.Context, id transport.SampleID, b []byte) error {
	if err := l.SampleStream.Push(ctx, id, b); err != nil {
		return err
	}
	_, err := l.params.Wait(ctx, l.params.Announced()+1)
	return err
}

// A lone env worker that learns of the learner's next version before its
// push returns does not wait for yet another version, which would need a
// segment it has not sent: no stale starts, and no 5 s waits.
func TestInlineLateAckDoesNotStall(t *testing.T) {
	const iters = 8
	start := time.Now()
	cnt, stale := inlineLag(t, 1, iters, 5*time.Millisecond, true)
	if stale != 0 || cnt.Learned != iters {
		t.Errorf("learned %d, stale starts %d; want %d and 0", cnt.Learned, stale, iters)
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Errorf("%d segments took %v: the worker waited for a version only its own next segment makes", iters, d)
	}
}
