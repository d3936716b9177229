package worker_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"herd/algo"
	"herd/algo/ppo"
	"herd/env"
	"herd/internal/rng"
	"herd/sample"
	"herd/transport"
	"herd/worker"
)

// cartPoleSegment is a segment of random CartPole-shaped data.
func cartPoleSegment(seed uint64) *sample.Segment {
	const T, N = 16, 4
	r := rng.New(seed, "test/segment", 0)
	s := sample.NewSegment(T, N, 4, 1)
	for k := range s.Obs {
		s.Obs[k] = float32(r.NormFloat64())
	}
	for k := range T * N {
		s.Actions[k] = float32(r.IntN(2))
		s.Rewards[k] = 1
		s.Values[k] = float32(r.NormFloat64())
		s.LogProbs[k] = float32(math.Log(0.5))
		if r.IntN(10) == 0 {
			s.Dones[k] = 1
			s.Episodes = append(s.Episodes, sample.Episode{Return: float64(k), Length: k + 1, At: k / N})
		}
	}
	for k := range s.NextObs {
		s.NextObs[k] = float32(r.NormFloat64())
	}
	for k := range N {
		s.LastValues[k] = float32(r.NormFloat64())
	}
	return s
}

// splitPPOPieces are PPO's pieces for CartPole with 4 envs × 16 steps, the
// minibatch split over m learners as the dist executor splits it.
func splitPPOPieces(t *testing.T, m int) *algo.Pieces {
	t.Helper()
	e, err := env.Make("CartPole-v1")
	if err != nil {
		t.Fatal(err)
	}
	sp := algo.SpacesOf(e)
	e.Close()
	h := algo.DefaultHeader()
	h.Algo, h.Env, h.Steps = "ppo", "CartPole-v1", 64*8
	cfg := ppo.DefaultConfig()
	cfg.NumEnvs, cfg.NumSteps, cfg.UpdateEpochs = 4, 16, 2
	c := cfg.WithMinibatch(cfg.Minibatch() / m).(*ppo.Config)
	p, err := ppo.Pieces(h, c, sp)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// runGroup runs m data-parallel learners as goroutines on their own
// segments (learner i's k-th is cartPoleSegment(100·i + k)) for iters
// updates and returns each learner's final weights and learner 0's
// reports.
func runGroup(t *testing.T, m, iters int, timeout time.Duration, only int) ([][]float32, []*sample.Segment, error) {
	t.Helper()
	w, reports, _, err := runGroupWith(t, m, iters, timeout, only, nil)
	return w, reports, err
}

// runGroupWith is runGroup with each learner's LearnerGroup passed
// through set (when not nil), which may wrap its Collective or set its
// options; it also returns learner 0's counters.
func runGroupWith(t *testing.T, m, iters int, timeout time.Duration, only int, set func(*worker.LearnerGroup)) ([][]float32, []*sample.Segment, worker.Counters, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ip := transport.NewInproc()
	pieces := splitPPOPieces(t, m)
	weights := make([][]float32, m)
	var reports []*sample.Segment
	var cnt0 worker.Counters
	errs := make([]error, m)
	var wg sync.WaitGroup
	for i := range m {
		if only >= 0 && i != only {
			continue
		}
		smp, err := ip.Samples(ctx, "run", transport.Options{Learner: i, Capacity: iters})
		if err != nil {
			t.Fatal(err)
		}
		defer smp.Close()
		for k := range iters {
			b, err := cartPoleSegment(uint64(100*i + k)).AppendEncode(nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := smp.Push(ctx, transport.SampleID{Slot: i, Incarnation: 1, Seq: uint64(k + 1)}, b); err != nil {
				t.Fatal(err)
			}
		}
		coll, err := ip.Collective(ctx, "run", transport.Options{Learner: i, Learners: m, GatherTimeout: timeout})
		if err != nil {
			t.Fatal(err)
		}
		group := &worker.LearnerGroup{Collective: coll, Learners: m, Slot: i}
		if set != nil {
			set(group)
		}
		par, err := ip.Params(ctx, "run", transport.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer par.Close()
		wg.Go(func() {
			cnt := &worker.Counters{}
			if i == 0 {
				cnt = &cnt0
			}
			cfg := worker.LearnerConfig{Iterations: iters, Counters: cnt, Group: group,
				OnIteration: func(_ int, seg *sample.Segment, _ []algo.Stat) { reports = append(reports, seg) }}
			l, err := worker.RunLearner(ctx, cfg, pieces, smp, par)
			errs[i] = err
			if err == nil && i == 0 && cnt.Learned != uint64(m*iters) {
				errs[i] = errors.New("learner 0's counters do not sum the group's")
			}
			if l != nil {
				v := l.Weights()
				for j := range v.Len() {
					weights[i] = append(weights[i], v.Param(j).Value...)
				}
			}
		})
	}
	wg.Wait()
	return weights, reports, cnt0, errors.Join(errs...)
}

// Two data-parallel learners keep identical parameters, and a run of them
// is reproducible bit for bit (the reduction order is learner-id order,
// whoever finishes first); learner 0 reports both learners' episodes.
func TestLearnerGroupDeterministic(t *testing.T) {
	const m, iters = 2, 3
	w1, reports, err := runGroup(t, m, iters, 30*time.Second, -1)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(w1[0], w1[1]) {
		t.Fatal("the two learners' parameters differ")
	}
	w2, _, err := runGroup(t, m, iters, 30*time.Second, -1)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(w1[0], w2[0]) {
		t.Fatal("two runs on the same data differ")
	}
	// Not the single learner's result on learner 0's data alone.
	w0, _, err := runGroup(t, 1, iters, 30*time.Second, -1)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Equal(w0[0], w1[0]) {
		t.Fatal("the group learned what learner 0 alone learns: the gradients were not shared")
	}
	if len(reports) != iters {
		t.Fatalf("%d reports for %d updates", len(reports), iters)
	}
	for k, seg := range reports {
		want := len(cartPoleSegment(uint64(k)).Episodes) + len(cartPoleSegment(uint64(100+k)).Episodes)
		if seg.N != 8 || seg.T != 16 || len(seg.Episodes) != want {
			t.Errorf("update %d: report %d×%d with %d episodes, want 16×8 with %d", k, seg.T, seg.N, len(seg.Episodes), want)
		}
	}
}

// Learners in one process average in place (transport.Sharer) with the
// bits of learners that exchange messages.
func TestLearnerGroupSharedIsMessages(t *testing.T) {
	const m, iters = 2, 3
	shared, _, _, err := runGroupWith(t, m, iters, 30*time.Second, -1, func(g *worker.LearnerGroup) {
		g.SharedMin = 1 // the test's small model too
	})
	if err != nil {
		t.Fatal(err)
	}
	msgs, _, _, err := runGroupWith(t, m, iters, 30*time.Second, -1, func(g *worker.LearnerGroup) {
		if _, ok := g.Collective.(transport.Sharer); !ok {
			t.Fatal("the in-process collective is no transport.Sharer")
		}
		g.Collective, g.SharedMin = plainPeer{g.Collective}, 1
	})
	if err != nil {
		t.Fatal(err)
	}
	for k := range m {
		if !slices.Equal(shared[k], msgs[k]) {
			t.Fatalf("learner %d: averaging in place and through messages give different parameters", k)
		}
	}
}

// A learner whose partner never shows up fails with an error naming it
// when the all-gather's deadline passes, instead of waiting for ever.
func TestLearnerGroupDeadPeer(t *testing.T) {
	_, _, err := runGroup(t, 2, 2, 200*time.Millisecond, 0)
	if !errors.Is(err, transport.ErrGather) || !strings.Contains(err.Error(), "learner(s) [1]") {
		t.Fatalf("got %v, want an all-gather error naming learner 1", err)
	}
}

// corruptPeer is learner 1's view of the group with learner 0's gradient
// messages (the binary ones; round infos are JSON) changed in one bit of
// a value (values are 4-byte aligned in the message, and its middle lies
// in the largest part's values), as a faulty link or reduction would:
// learner 1's parameters drift.
type corruptPeer struct{ transport.Collective }

func (c corruptPeer) AllGather(ctx context.Context, b []byte) ([][]byte, error) {
	out, err := c.Collective.AllGather(ctx, b)
	if err == nil && len(out[0]) > 0 && out[0][0] != '{' {
		m := slices.Clone(out[0])
		m[len(m)/2&^3+3] ^= 1 // the exponent's low bit
		out[0] = m
	}
	return out, err
}

// plainPeer is a learner's view of the group without transport.Sharer:
// its gradients go as messages, as between processes.
type plainPeer struct{ transport.Collective }

// Learners whose parameters drift apart stop at the next comparison of
// their hashes (every paramsCheckEvery rounds) with an error saying so;
// learners that agree count their checks.
func TestLearnerGroupParamsDiffer(t *testing.T) {
	const iters = 18 // the checks at rounds 0 and 16
	_, _, _, err := runGroupWith(t, 2, iters, 30*time.Second, -1, func(g *worker.LearnerGroup) {
		if g.Slot == 1 {
			g.Collective = corruptPeer{g.Collective}
			return
		}
		g.Collective = plainPeer{g.Collective} // messages, as learner 1's
	})
	if !errors.Is(err, worker.ErrParamsDiffer) || !strings.Contains(err.Error(), "parameters differ") {
		t.Fatalf("got %v, want the learners' parameters to differ", err)
	}
	_, _, cnt, err := runGroupWith(t, 2, iters, 30*time.Second, -1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cnt.ParamChecks != 2 {
		t.Errorf("learner 0 counted %d checks in %d rounds, want 2", cnt.ParamChecks, iters)
	}
}
