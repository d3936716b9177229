package worker_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"herd/algo"
	"herd/algo/dqn"
	"herd/algo/td3"
	"herd/env"
	"herd/internal/rng"
	"herd/sample"
	"herd/transport"
	"herd/worker"
)

// The off-policy group test's schedule: samples of chunkRows transitions
// (one env step each), learning from env step learningStarts on.
const (
	chunkRows      = 20
	learningStarts = 200
)

// offCase is an off-policy algorithm's pieces for M learners, split as
// the dist executor splits them (buffer_size/M, batch_size/M).
type offCase struct {
	name, env string
	pieces    func(t *testing.T, m int) *algo.Pieces
}

func offPieces(t *testing.T, envID string, c algo.Config, mk func(algo.Header, algo.Config, algo.Spaces) (*algo.Pieces, error), m, steps int) *algo.Pieces {
	t.Helper()
	e, err := env.Make(envID)
	if err != nil {
		t.Fatal(err)
	}
	sp := algo.SpacesOf(e)
	e.Close()
	h := algo.DefaultHeader()
	h.Env, h.Seed, h.Steps = envID, 3, int64(steps)
	rs := c.(algo.ReplaySizer)
	c = rs.WithReplayCapacity(rs.ReplayCapacity() / m)
	mb := c.(algo.Minibatcher)
	c = mb.WithMinibatch(mb.Minibatch() / m)
	p, err := mk(h, c, sp)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

var offCases = []offCase{
	{"dqn", "CartPole-v1", func(t *testing.T, m int) *algo.Pieces {
		c := dqn.NewConfig()
		c.BatchSize, c.BufferSize, c.LearningStarts, c.TrainFrequency = 32, 2000, learningStarts, 4
		c.TargetNetworkFrequency, c.NetArch, c.Tau = 100, []int{16}, 0.5
		return offPieces(t, "CartPole-v1", c, dqn.Pieces, m, 1)
	}},
	{"td3", "Pendulum-v1", func(t *testing.T, m int) *algo.Pieces {
		c := td3.NewConfig()
		c.BatchSize, c.BufferSize, c.LearningStarts, c.NetArch = 16, 2000, learningStarts, []int{16}
		return offPieces(t, "Pendulum-v1", c, td3.Pieces, m, 1)
	}},
}

// randomTransitions are chunkRows transitions of random data shaped for
// envID's spaces.
func randomTransitions(t *testing.T, envID string, seed uint64) []byte {
	t.Helper()
	e, err := env.Make(envID)
	if err != nil {
		t.Fatal(err)
	}
	obsDim := e.ObservationSpace().Dim()
	d, discrete := e.ActionSpace().(env.Discrete)
	actDim := 1
	if !discrete {
		actDim = e.ActionSpace().Dim()
	}
	e.Close()
	r := rng.New(seed, "test/transitions", 0)
	tr := sample.NewTransitions(chunkRows, obsDim, actDim)
	for k := range tr.Obs {
		tr.Obs[k], tr.NextObs[k] = float32(r.NormFloat64()), float32(r.NormFloat64())
	}
	for k := range tr.Actions {
		if discrete {
			tr.Actions[k] = float32(r.IntN(d.N))
		} else {
			tr.Actions[k] = float32(2*r.Float64() - 1)
		}
	}
	for k := range chunkRows {
		tr.Rewards[k], tr.Discounts[k] = float32(r.NormFloat64()), 0.99
		if r.IntN(20) == 0 {
			tr.Dones[k] = 1
			tr.Episodes = append(tr.Episodes, sample.Episode{Return: float64(k), Length: k + 1})
		}
	}
	b, err := tr.AppendEncode(nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// offResult is what one learner of a group ended with.
type offResult struct {
	state  []float32 // its State: online and target networks
	counts algo.UpdateCounts
	n      uint64 // updates (its weights' version)
}

// runOffGroup runs m off-policy learners as goroutines for total samples
// of chunkRows env steps (m = 1: the single learner, no group): learner
// i learns sample k of the run's if k mod m = i, as env worker k mod m's.
// sharedMin is the group's LearnerGroup.SharedMin. It returns each
// learner's result and what learner 0 reported.
func runOffGroup(t *testing.T, c offCase, m, total, sharedMin int) ([]offResult, int, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	ip := transport.NewInproc()
	pieces := c.pieces(t, m)
	res := make([]offResult, m)
	errs := make([]error, m)
	episodes := 0
	var wg sync.WaitGroup
	for i := range m {
		smp, err := ip.Samples(ctx, "run", transport.Options{Learner: i, Capacity: total})
		if err != nil {
			t.Fatal(err)
		}
		defer smp.Close()
		for k := i; k < total; k += m {
			if err := smp.Push(ctx, transport.SampleID{Slot: i, Incarnation: 1, Seq: uint64(k + 1)}, randomTransitions(t, c.env, uint64(k))); err != nil {
				t.Fatal(err)
			}
		}
		par, err := ip.Params(ctx, "run", transport.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer par.Close()
		cfg := worker.OffLearnerConfig{Steps: int64(total * chunkRows), StepsPerSample: chunkRows, PublishEvery: 1}
		if m > 1 {
			coll, err := ip.Collective(ctx, "run", transport.Options{Learner: i, Learners: m, GatherTimeout: 30 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			cfg.Group = &worker.LearnerGroup{Collective: coll, Learners: m, Slot: i, SharedMin: sharedMin}
		}
		if i == 0 {
			cfg.OnSample = func(_ int64, tr *sample.Transitions, _ []algo.Stat) { episodes += len(tr.Episodes) }
		}
		wg.Go(func() {
			l, err := worker.RunOffLearner(ctx, cfg, pieces, smp, par)
			errs[i] = err
			if l == nil {
				return
			}
			sl := l.(algo.SplitLearner)
			s := sl.State()
			for j := range s.Len() {
				res[i].state = append(res[i].state, s.Param(j).Value...)
			}
			res[i].counts, res[i].n = l.(algo.UpdateCounter).UpdateCounts(), l.Weights().N
		})
	}
	wg.Wait()
	return res, episodes, errors.Join(errs...)
}

// M data-parallel off-policy learners make the updates, optimizer steps
// and target updates of one learner over the same env steps, keep
// identical parameters, reproduce them bit for bit, and learner 0 reports
// every learner's episodes.
func TestOffLearnerGroup(t *testing.T) {
	const total = 40 // samples: 800 env steps, 600 of them after learning starts
	for _, c := range offCases {
		t.Run(c.name, func(t *testing.T) {
			one, eps1, err := runOffGroup(t, c, 1, total, 0)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("one learner: %d updates, %+v", one[0].n, one[0].counts)
			if one[0].n == 0 || one[0].counts.Target == 0 {
				t.Fatalf("the single learner made %d updates, %+v: the test learns nothing", one[0].n, one[0].counts)
			}
			for _, m := range []int{2, 4} {
				t.Run(fmt.Sprint("learners=", m), func(t *testing.T) {
					got, eps, err := runOffGroup(t, c, m, total, 0)
					if err != nil {
						t.Fatal(err)
					}
					for i, r := range got {
						if r.counts != one[0].counts || r.n != one[0].n {
							t.Errorf("learner %d: %d updates, %+v; one learner: %d, %+v", i, r.n, r.counts, one[0].n, one[0].counts)
						}
						if !slices.Equal(r.state, got[0].state) {
							t.Errorf("learner %d's parameters differ from learner 0's", i)
						}
					}
					if eps != eps1 {
						t.Errorf("learner 0 reported %d episodes, the single learner %d", eps, eps1)
					}
					if slices.Equal(got[0].state, one[0].state) {
						t.Error("the group learned what one learner learns on other minibatches: the gradients were not shared")
					}
					again, _, err := runOffGroup(t, c, m, total, 0)
					if err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(again[0].state, got[0].state) {
						t.Error("two runs on the same data differ")
					}
					// Averaged in place (as for a model of 64k values or
					// more): the same bits as through messages.
					shared, _, err := runOffGroup(t, c, m, total, 1)
					if err != nil {
						t.Fatal(err)
					}
					for i, r := range shared {
						if !slices.Equal(r.state, got[0].state) {
							t.Errorf("learner %d: averaging in place and through messages give different parameters", i)
						}
					}
				})
			}
		})
	}
}

// A learner whose group's schedules disagree (here: another run length)
// fails with an error instead of applying gradients of different updates.
func TestOffLearnerGroupDiverged(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ip := transport.NewInproc()
	c := offCases[0]
	pieces := c.pieces(t, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range 2 {
		smp, err := ip.Samples(ctx, "run", transport.Options{Learner: i, Capacity: 64})
		if err != nil {
			t.Fatal(err)
		}
		defer smp.Close()
		for k := range 30 {
			if err := smp.Push(ctx, transport.SampleID{Slot: i, Incarnation: 1, Seq: uint64(k + 1)}, randomTransitions(t, c.env, uint64(2*k+i))); err != nil {
				t.Fatal(err)
			}
		}
		coll, err := ip.Collective(ctx, "run", transport.Options{Learner: i, Learners: 2, GatherTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		par, err := ip.Params(ctx, "run", transport.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer par.Close()
		// Learner 1 believes each sample holds one more env step.
		cfg := worker.OffLearnerConfig{Steps: 40 * chunkRows, StepsPerSample: int64(chunkRows + i), PublishEvery: 1,
			Group: &worker.LearnerGroup{Collective: coll, Learners: 2, Slot: i}}
		wg.Go(func() { _, errs[i] = worker.RunOffLearner(ctx, cfg, pieces, smp, par) })
	}
	wg.Wait()
	if err := errors.Join(errs...); !errors.Is(err, algo.ErrGradShape) {
		t.Fatalf("got %v, want an error saying the schedules diverged", err)
	}
}
