package worker

import (
	"bytes"
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"herd/algo"
	"herd/algo/algotest"
	"herd/env"
	"herd/sample"
	"herd/transport"
	"herd/weights"
)

// TestSlowLearnerLearnsEachSegmentOnce reproduces a push whose wait runs
// out while the sample still waits at the learner: the env worker retries
// it, and the learner must queue it once. The learner here pulls every
// 300 ms with a queue of 1 and the env worker's push timeout is 100 ms,
// so every push is retried several times while its first send is pending.
func TestSlowLearnerLearnsEachSegmentOnce(t *testing.T) {
	dial := natsDialer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	opt := transport.Options{ObsDim: 4, OutDim: 2, Like: algotest.NewParams(), Capacity: 1}
	open := func() (transport.InferenceStream, transport.SampleStream, transport.ParamService) {
		n := dial()
		inf, _ := n.Inference(ctx, "once", opt)
		s, _ := n.Samples(ctx, "once", opt)
		p, err := n.Params(ctx, "once", opt)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = inf.Close(); _ = s.Close(); _ = p.Close() })
		return inf, s, p
	}
	pieces := algotest.Pieces()
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	inf, _, p := open()
	wg.Go(func() { _ = RunPolicy(wctx, pieces, inf, p) })
	inf2, s2, _ := open()
	e, err := env.Make("CartPole-v1", env.WithEpisodeStatistics())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() }) // after the workers have stopped (the deferred Wait)
	wg.Go(func() {
		_ = RunEnv(wctx, EnvConfig{Slot: 0, Seed: 1, Envs: []env.Env{e}, Steps: 8, Gamma: 0.99,
			Timeouts: Timeouts{Push: 100 * time.Millisecond}}, pieces, inf2, s2)
	})
	_, learner, lp := open()
	if err := lp.Publish(ctx, weights.New(0, algotest.NewParams())); err != nil {
		t.Fatal(err)
	}
	var got [][]byte
	for range 6 {
		if err := sleepCtx(ctx, 300*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		b, err := learner.Pull(ctx)
		if err != nil {
			t.Fatal(err)
		}
		seg, err := sample.DecodeSegment(b)
		if err != nil {
			t.Fatal(err)
		}
		for i, g := range got {
			if bytes.Equal(g, b) {
				t.Errorf("pull %d repeats pull %d (segment of worker %d, version %d)", len(got), i, seg.Worker, seg.Version)
			}
		}
		got = append(got, b)
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// recordingSamples is a SampleStream that keeps what is pushed to it.
type recordingSamples struct {
	transport.SampleStream
	mu  sync.Mutex
	ids []transport.SampleID
	bs  [][]byte
}

func (r *recordingSamples) Push(_ context.Context, id transport.SampleID, b []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ids, r.bs = append(r.ids, id), append(r.bs, b)
	return nil
}

// stepSampler records the schedule steps it is asked for.
type stepSampler struct {
	algo.Sampler
	steps *[]int64
}

func (s stepSampler) SampleTo(dst *algo.Acts, out []float32, n int, step int64) {
	*s.steps = append(*s.steps, step)
	s.Sampler.SampleTo(dst, out, n, step)
}

func (s stepSampler) ValuesTo(dst, out []float32, n int) { s.Sampler.(Valuer).ValuesTo(dst, out, n) }

// TestRestartedEnvWorkerContinues checks that a restarted env worker
// continues its sequence under its new incarnation, draws from streams of
// its own rather than replaying the first start's, and continues its
// schedule's step count.
func TestRestartedEnvWorkerContinues(t *testing.T) {
	ctx := context.Background()
	ip := transport.NewInproc()
	inf, err := ip.Inference(ctx, "restart", transport.Options{ObsDim: 4, OutDim: 2})
	if err != nil {
		t.Fatal(err)
	}
	params, _ := ip.Params(ctx, "restart", transport.Options{})
	pieces := algotest.Pieces()
	var steps []int64
	newSampler := pieces.NewSampler
	pieces.NewSampler = func(n int, r *rand.Rand) (algo.Sampler, error) {
		s, err := newSampler(n, r)
		return stepSampler{s, &steps}, err
	}
	if err := params.Publish(ctx, weights.New(0, algotest.NewParams())); err != nil {
		t.Fatal(err)
	}
	pctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	wg.Go(func() { _ = RunPolicy(pctx, pieces, inf, params) })
	run := func(resume transport.Progress) (*recordingSamples, []transport.Progress) {
		e, err := env.Make("CartPole-v1", env.WithEpisodeStatistics())
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		rec := &recordingSamples{}
		var saved []transport.Progress
		steps = steps[:0]
		err = RunEnv(ctx, EnvConfig{Slot: 2, Seed: 1, Envs: []env.Env{e}, Steps: 8, Gamma: 0.99, Segments: 2,
			Resume: resume, OnPushed: func(p transport.Progress) { saved = append(saved, p) }}, pieces, inf, rec)
		if err != nil {
			t.Fatal(err)
		}
		return rec, saved
	}
	first, saved := run(transport.Progress{Incarnation: 1})
	if want := []transport.SampleID{{Slot: 2, Incarnation: 1, Seq: 1}, {Slot: 2, Incarnation: 1, Seq: 2}}; !slices.Equal(first.ids, want) {
		t.Errorf("first start pushed %v, want %v", first.ids, want)
	}
	if len(saved) != 2 || saved[1] != (transport.Progress{Incarnation: 1, Seq: 2, Steps: 16}) {
		t.Errorf("first start's progress %+v", saved)
	}
	again, _ := run(saved[1])
	if !bytes.Equal(again.bs[0], first.bs[0]) {
		t.Error("the same incarnation did not replay the same segment (determinism)")
	}
	resumed := saved[1]
	resumed.Incarnation = 2
	second, saved2 := run(resumed)
	if want := []transport.SampleID{{Slot: 2, Incarnation: 2, Seq: 3}, {Slot: 2, Incarnation: 2, Seq: 4}}; !slices.Equal(second.ids, want) {
		t.Errorf("restart pushed %v, want %v", second.ids, want)
	}
	if steps[0] != 16 || saved2[1].Steps != 32 {
		t.Errorf("restart's schedule began at step %d and saved %d, want 16 and 32", steps[0], saved2[1].Steps)
	}
	if bytes.Equal(second.bs[0], first.bs[0]) {
		t.Error("the restarted worker replayed its first start's seeds")
	}
}

// TestLearnerBoundsAndCountsLag pushes segments of known behaviour
// versions and checks which the learner drops and the lags it counts.
func TestLearnerBoundsAndCountsLag(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ip := transport.NewInproc()
	smp, _ := ip.Samples(ctx, "lag", transport.Options{Capacity: 16})
	params, _ := ip.Params(ctx, "lag", transport.Options{})
	seg := func(versions ...uint64) []byte {
		s := sample.NewSegment(len(versions), 1, 4, 1)
		s.Versions, s.Version = versions, slices.Min(versions)
		b, err := s.AppendEncode(nil)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// The learner is at version k when it pulls the k-th learned segment.
	for i, b := range [][]byte{
		seg(0, 0),    // at 0: lags 0, 0
		seg(0, 1),    // at 1: lags 1, 0
		seg(0, 0),    // at 2: lag 2 > 1: dropped
		[]byte("xx"), // does not decode
		seg(1, 2),    // at 2: lags 1, 0
	} {
		if err := smp.Push(ctx, transport.SampleID{Slot: 0, Seq: uint64(i + 1)}, b); err != nil {
			t.Fatal(err)
		}
	}
	var c Counters
	_, err := RunLearner(ctx, LearnerConfig{Iterations: 3, MaxLag: 1, Counters: &c}, algotest.Pieces(), smp, params)
	if err != nil {
		t.Fatal(err)
	}
	want := Counters{Learned: 3, Dropped: 1, DecodeErrors: 1, LagSum: 2, LagSteps: 6, LagMax: 1}
	if c != want {
		t.Errorf("counters %+v, want %+v", c, want)
	}
}

// TestLearnerWatchdog checks that a learner that gets no sample ends with
// an error that says so and who is alive, instead of waiting forever.
func TestLearnerWatchdog(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ip := transport.NewInproc()
	smp, _ := ip.Samples(ctx, "stall", transport.Options{})
	params, _ := ip.Params(ctx, "stall", transport.Options{})
	_, err := RunLearner(ctx, LearnerConfig{Iterations: 1, Stall: 200 * time.Millisecond,
		Alive: func(context.Context) string { return "env workers alive: none" }}, algotest.Pieces(), smp, params)
	if err == nil || !strings.Contains(err.Error(), "no sample for 200ms") || !strings.Contains(err.Error(), "env workers alive: none") {
		t.Fatalf("err = %v", err)
	}
	if ctx.Err() != nil {
		t.Fatal("the watchdog did not fire")
	}
}

// TestLearnerWatchdogOnDrops: segments that keep coming but are all too
// old (the acting weights stuck) end the run with an error after the
// stall time, instead of a learner that pulls and drops for ever.
func TestLearnerWatchdogOnDrops(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ip := transport.NewInproc()
	smp, _ := ip.Samples(ctx, "drops", transport.Options{Capacity: 1})
	params, _ := ip.Params(ctx, "drops", transport.Options{})
	mk := func(v uint64) []byte {
		s := sample.NewSegment(1, 1, 4, 1)
		s.Versions, s.Version = []uint64{v}, v
		b, err := s.AppendEncode(nil)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		// Segments of version 0 for ever: the first two are learned (at
		// versions 0 and 1), every later one is 2 versions old: lag > 1.
		for i := uint64(1); pctx.Err() == nil; i++ {
			if smp.Push(pctx, transport.SampleID{Slot: 0, Seq: i}, mk(0)) != nil {
				return
			}
		}
	}()
	var c Counters
	_, err := RunLearner(ctx, LearnerConfig{Iterations: 1000, MaxLag: 1, Stall: 300 * time.Millisecond, Counters: &c},
		algotest.Pieces(), smp, params)
	if err == nil || !strings.Contains(err.Error(), "dropped every sample for 300ms") {
		t.Fatalf("err = %v, want the watchdog's error on drops", err)
	}
	if ctx.Err() != nil || c.Dropped == 0 || c.Learned == 0 {
		t.Fatalf("counters %+v, ctx %v: want some learned, then drops", c, ctx.Err())
	}
}

// TestLearnerResumes: a learner started with Start (a resumed run) counts
// the iterations Start says are done toward Iterations, and numbers its
// versions from MinVersion on, so that readers holding an earlier
// learner's versions take its weights.
func TestLearnerResumes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ip := transport.NewInproc()
	smp, _ := ip.Samples(ctx, "resume", transport.Options{Capacity: 16})
	params, _ := ip.Params(ctx, "resume", transport.Options{})
	for i := range 3 {
		s := sample.NewSegment(2, 1, 4, 1)
		s.Version = 40
		b, err := s.AppendEncode(nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := smp.Push(ctx, transport.SampleID{Slot: 0, Seq: uint64(i + 1)}, b); err != nil {
			t.Fatal(err)
		}
	}
	var published []uint64
	var c Counters
	_, err := RunLearner(ctx, LearnerConfig{Iterations: 5, Counters: &c, MinVersion: 50,
		Start: func(l algo.SegmentLearner) (int, error) { return 3, nil },
		OnIteration: func(int, *sample.Segment, []algo.Stat) {
			published = append(published, params.Latest().N)
		}}, algotest.Pieces(), smp, params)
	if err != nil {
		t.Fatal(err)
	}
	if c.Learned != 2 || !slices.Equal(published, []uint64{51, 52}) {
		t.Errorf("learned %d, published %v after the first version; want 2 (iterations 3 and 4 of 5) and [51 52]", c.Learned, published)
	}
	if c.LagMax != 11 {
		t.Errorf("lag max %d, want 11 (version 51 learning a segment of version 40)", c.LagMax)
	}
}
