package worker

import (
	"context"
	"sync"
	"testing"
	"time"

	"herd/algo"
	"herd/algo/dqn"
	"herd/env"
	"herd/nn"
	"herd/sample"
	"herd/transport"
)

// offTopology runs the Ape-X topology — 2 off-policy env workers (2
// CartPoles each, inline Q-network copies, actor priorities) and the
// learner with prioritized replay — on tr and checks what the learner saw:
// every sample carries one finite positive priority per transition, the
// env workers act with newer weights as they are published, a malformed
// sample is dropped, and the learner makes exactly the updates DQN's
// schedule asks for over the env steps it received.
func offTopology(t *testing.T, mk func() transport.Transport) {
	const (
		chunk, numEnvs = 25, 2
		steps          = 4000
		learningStarts = 500
		trainFrequency = 4
	)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	h := algo.Header{Algo: "dqn", Env: "CartPole-v1", Seed: 5, Steps: steps}
	cfg := dqn.NewConfig()
	cfg.NumEnvs, cfg.BatchSize, cfg.LearningStarts, cfg.TrainFrequency = numEnvs, 32, learningStarts, trainFrequency
	cfg.TargetNetworkFrequency, cfg.NetArch, cfg.BufferSize = 100, []int{16}, 2000
	cfg.Prioritized, cfg.NSteps, cfg.InitialPriorities = true, 3, dqn.PrioritiesActor
	if err := cfg.Validate(h); err != nil {
		t.Fatal(err)
	}
	probe, err := env.Make(h.Env)
	if err != nil {
		t.Fatal(err)
	}
	pieces, err := dqn.Pieces(h, cfg, algo.SpacesOf(probe))
	probe.Close()
	if err != nil {
		t.Fatal(err)
	}
	l0, err := pieces.NewTransitionLearner()
	if err != nil {
		t.Fatal(err)
	}
	v0 := l0.Weights()
	_ = l0.Close()
	like := make([]*nn.Param, v0.Len())
	for i := range like {
		like[i] = v0.Param(i)
	}
	opt := transport.Options{ObsDim: 4, OutDim: 2, Like: like, Capacity: 2}
	run := "apex"
	open := func() (transport.SampleStream, transport.ParamService) {
		tr := mk()
		s, err := tr.Samples(ctx, run, opt)
		if err != nil {
			t.Fatal(err)
		}
		p, err := tr.Params(ctx, run, opt)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close(); _ = p.Close() })
		return s, p
	}
	wctx, stopWorkers := context.WithCancel(ctx)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for slot := range 2 {
		s, p := open()
		envs, err := env.MakeVector(h.Env, numEnvs, env.Sync, env.WithEpisodeStatistics())
		if err != nil {
			t.Fatal(err)
		}
		defer envs.Close()
		wg.Go(func() {
			err := RunOffEnv(wctx, OffEnvConfig{Slot: slot, Seed: h.Seed, Envs: envs, Chunk: chunk, RefreshEvery: 1, StepScale: 2}, pieces, p, s)
			if err != nil && wctx.Err() == nil {
				errs <- err
			}
		})
	}
	s, p := open()
	// A malformed sample on the stream is dropped, never fatal. (On NATS
	// a push waits for a learner to pull, hence the goroutine.)
	bad, _ := open()
	wg.Go(func() {
		if err := bad.Push(wctx, transport.SampleID{Slot: 9}, []byte("not a sample")); err != nil && wctx.Err() == nil {
			errs <- err
		}
	})
	var (
		drops, samples, episodes int
		lastVersion              uint64
		lastStep                 int64
	)
	t0 := time.Now()
	l, err := RunOffLearner(ctx, OffLearnerConfig{Steps: steps, StepsPerSample: chunk * numEnvs, PublishEvery: 1,
		OnDrop: func(error) { drops++ },
		OnSample: func(step int64, tr *sample.Transitions, _ []algo.Stat) {
			samples++
			episodes += len(tr.Episodes)
			lastVersion, lastStep = max(lastVersion, tr.Version), step
			if len(tr.Priorities) != tr.N {
				t.Errorf("sample %d: %d priorities for %d transitions", samples, len(tr.Priorities), tr.N)
			}
			for i, x := range tr.Priorities {
				if !(x > 0) {
					t.Errorf("sample %d: priority %d = %v, want > 0", samples, i, x)
				}
			}
		}}, pieces, s, p)
	t.Logf("learner done after %v", time.Since(t0))
	endWorkers(t, stopWorkers, &wg, errs, err)
	wantUpdates := uint64((steps - learningStarts) / trainFrequency)
	if got := l.Weights().N; got != wantUpdates {
		t.Errorf("learner made %d updates, want %d", got, wantUpdates)
	}
	if v := p.Latest(); v == nil || v.N != wantUpdates {
		t.Errorf("parameter service latest %v, want version %d", v, wantUpdates)
	}
	if samples != steps/(chunk*numEnvs) || lastStep != steps || drops != 1 {
		t.Errorf("%d samples up to step %d, %d dropped; want %d, %d, 1", samples, lastStep, drops, steps/(chunk*numEnvs), steps)
	}
	if lastVersion == 0 {
		t.Error("env workers never acted with published weights")
	}
	if episodes == 0 {
		t.Error("no episode ended")
	}
	t.Logf("%d samples, %d episodes, newest acting version %d", samples, episodes, lastVersion)
}

func TestOffTopologyInproc(t *testing.T) {
	ip := transport.NewInproc()
	offTopology(t, func() transport.Transport { return ip })
}

func TestOffTopologyNATS(t *testing.T) {
	dial := natsDialer(t)
	offTopology(t, func() transport.Transport { return dial() })
}

// TestOffConfigErrors: bad settings are refused with an error, not a hang.
func TestOffConfigErrors(t *testing.T) {
	ctx := context.Background()
	if err := RunOffEnv(ctx, OffEnvConfig{Chunk: 0}, nil, nil, nil); err == nil {
		t.Error("RunOffEnv without envs or pieces: no error")
	}
	if _, err := RunOffLearner(ctx, OffLearnerConfig{Steps: 10}, nil, nil, nil); err == nil {
		t.Error("RunOffLearner without pieces: no error")
	}
}
