package pal

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"herd/algo"
	"herd/algo/ddpg"
	"herd/algo/sac"
	"herd/algo/td3"
	"herd/env"
	"herd/internal/rng"
	"herd/sample"
	"herd/weights"
)

// The actor-critics of the phase tests: small networks, learning from
// step 50 of a replay filled beforehand.
var phaseCases = []struct {
	spec algo.Spec
	file string
}{
	{td3.Spec(), "algo: td3\nenv: Pendulum-v1\nseed: 1\nsteps: 200\ntd3: {batch_size: 16, learning_starts: 50, net_arch: [8, 8]}\n"},
	{td3.Spec(), "algo: td3\nenv: Pendulum-v1\nseed: 1\nsteps: 200\ntd3: {batch_size: 16, learning_starts: 50, net_arch: [8, 8], policy_frequency: 3}\n"},
	{sac.Spec(), "algo: sac\nenv: Pendulum-v1\nseed: 1\nsteps: 200\nsac: {batch_size: 16, learning_starts: 50, net_arch: [8, 8]}\n"},
	{ddpg.Spec(), "algo: ddpg\nenv: Pendulum-v1\nseed: 1\nsteps: 200\nddpg: {batch_size: 16, learning_starts: 50, net_arch: [8, 8], policy_frequency: 2}\n"},
}

// phasePieces returns the run's pieces and a replay of 300 random
// Pendulum transitions.
func phasePieces(t *testing.T, spec algo.Spec, file string) (*algo.Resolved, *algo.Pieces, algo.Replay) {
	t.Helper()
	res := resolve(t, spec, file)
	e, err := res.Header.Envs.Make(res.Header.Env)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	sp := algo.SpacesOf(e)
	p, err := spec.Pieces(res.Header, res.Config, sp)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := p.NewReplay()
	if err != nil {
		t.Fatal(err)
	}
	asm, err := p.NewAssembler(1)
	if err != nil {
		t.Fatal(err)
	}
	r := rng.New(3, "test/replay", 0)
	d, ad := sp.Obs.Dim(), sp.Act.Dim()
	obs := func() []float32 {
		o := make([]float32, d)
		for i := range o {
			o[i] = float32(r.NormFloat64())
		}
		return o
	}
	act := make([]float32, ad)
	var tr sample.Transitions
	for i := range 300 {
		next := obs()
		b := &env.Batch{ObsDim: d, Obs: next, Rewards: []float32{float32(r.NormFloat64())},
			Terminated: []bool{i%37 == 36}, Truncated: []bool{false}, Infos: make([]env.Info, 1), FinalObs: next}
		sp.Act.SampleTo(act, r)
		if err := asm.Add(&tr, obs(), act, b); err != nil {
			t.Fatal(err)
		}
	}
	if err := rb.Add(&tr); err != nil {
		t.Fatal(err)
	}
	return res, p, rb
}

// recorder is the service's learner, recording its update counts after
// every apply.
type recorder struct {
	algo.SplitLearner
	after []applied
}

type applied struct {
	t      algo.Ticket
	counts algo.UpdateCounts
}

func (r *recorder) Phases(t algo.Ticket) int { return algo.Phases(r.SplitLearner, t) }

func (r *recorder) Apply(g *algo.Grad) ([]algo.Stat, error) {
	stats, err := r.SplitLearner.Apply(g)
	r.after = append(r.after, applied{t: g.Ticket, counts: r.SplitLearner.(algo.UpdateCounter).UpdateCounts()})
	return stats, err
}

// serve runs a service of M learners over env steps (0, steps] of a
// replay filled beforehand, committed one by one, and returns its
// learner; sameSlot gives every learner slot 0's streams (identical
// minibatches and noise).
func serve(t *testing.T, p *algo.Pieces, rb algo.Replay, steps int64, M int, mode string, sameSlot bool) *recorder {
	t.Helper()
	l, err := p.NewTransitionLearner()
	if err != nil {
		t.Fatal(err)
	}
	main := &recorder{SplitLearner: l.(algo.SplitLearner)}
	t.Cleanup(func() { main.Close() })
	lim := newLimiter(steps, 4, false)
	store := weights.NewStore(main.Weights())
	fork := rb.(algo.ForkReplay)
	svc, err := newService(lim, main, p, fork, fork.Fork(), store,
		Options{Learners: M, LearnerMode: mode, PublishEvery: 1}, algo.Discard())
	if err != nil {
		t.Fatal(err)
	}
	defer svc.close()
	if sameSlot {
		for _, w := range svc.workers {
			w.l.SetSlot(0)
		}
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			if _, ok := lim.reserve(1); !ok {
				return
			}
			lim.commit(1)
		}
	}()
	res := svc.run(context.Background())
	wg.Wait()
	if res.err != nil || res.last != steps {
		t.Fatalf("M %d %s: err %v, consumed %d of %d steps", M, mode, res.err, res.last, steps)
	}
	return main
}

// TestSameWeightsAsLearn: one update is one computation whoever takes it.
// The parameter service with M learners that all draw the same minibatch
// and noise (slot 0's streams: sync rounds with M = 1 and 2, whose mean
// of identical gradients is exact; async with M = 1) ends with the state,
// bit for bit, and the update counts of one learner's Learn over the same
// steps — for TD3, SAC and DDPG, whose actor gradient (and SAC's α's) is
// taken at the critics the update's critic step left.
func TestSameWeightsAsLearn(t *testing.T) {
	const steps = 200
	for ci, c := range phaseCases {
		_, p, rb := phasePieces(t, c.spec, c.file)
		l, err := p.NewTransitionLearner()
		if err != nil {
			t.Fatal(err)
		}
		ref := l.(algo.SplitLearner)
		for s := int64(1); s <= steps; s++ {
			if _, err := ref.Learn(context.Background(), rb.(algo.ForkReplay).Fork(), s-1, s); err != nil {
				t.Fatal(err)
			}
		}
		want := ref.State()
		wantCounts := ref.(algo.UpdateCounter).UpdateCounts()
		ref.Close()
		for _, run := range []struct {
			M    int
			mode string
		}{{1, ModeSync}, {2, ModeSync}, {1, ModeAsync}} {
			name := fmt.Sprintf("case %d (%s) M %d %s", ci, c.spec.Name, run.M, run.mode)
			got := serve(t, p, rb, steps, run.M, run.mode, true)
			if gc := got.SplitLearner.(algo.UpdateCounter).UpdateCounts(); gc != wantCounts {
				t.Errorf("%s: counts %+v, Learn's %+v", name, gc, wantCounts)
			}
			gs := got.State()
			if gs.N != want.N || gs.Len() != want.Len() {
				t.Fatalf("%s: state %d of %d params, Learn's %d of %d", name, gs.N, gs.Len(), want.N, want.Len())
			}
			for i := range want.Len() {
				a, b := gs.Param(i).Value, want.Param(i).Value
				for j := range b {
					if a[j] != b[j] {
						t.Fatalf("%s: parameter %s[%d] is %v, Learn's %v", name, want.Param(i).Name, j, a[j], b[j])
					}
				}
			}
		}
	}
}

// TestActorEveryPolicyFrequency: under several learners, in both modes,
// TD3's and DDPG's actor and targets step once, right after every
// policy_frequency-th critic step and never elsewhere; SAC's actor takes
// policy_frequency steps right after the critic step at every multiple of
// policy_frequency.
func TestActorEveryPolicyFrequency(t *testing.T) {
	const steps = 120
	for _, c := range phaseCases {
		res, p, rb := phasePieces(t, c.spec, c.file)
		var pf uint64
		switch cfg := res.Config.(type) {
		case *td3.Config:
			pf = uint64(cfg.PolicyFrequency)
		case *ddpg.Config:
			pf = uint64(cfg.PolicyFrequency)
		case *sac.Config:
			pf = uint64(cfg.PolicyFrequency)
		}
		for _, mode := range []string{ModeAsync, ModeSync} {
			for _, M := range []int{2, 3} {
				name := fmt.Sprintf("%s pf %d M %d %s", c.spec.Name, pf, M, mode)
				main := serve(t, p, rb, steps, M, mode, false)
				var prev algo.UpdateCounts
				for _, a := range main.after {
					k, got := a.t.Index, a.counts
					// The actor's phases come at TD3's and DDPG's every
					// policy_frequency-th update, at SAC's multiples of
					// policy_frequency in env steps, and nowhere else.
					due := k%pf == 0
					if c.spec.Name == "sac" {
						due = uint64(a.t.Step)%pf == 0
					}
					if a.t.Phase > 0 && !due {
						t.Fatalf("%s: an actor phase at update %d (step %d)", name, k, a.t.Step)
					}
					// Before update k, updates 1 … k−1 took all theirs.
					before := (k - 1) / pf
					if c.spec.Name == "sac" {
						before = (uint64(a.t.Step-1)/pf - 50/pf) * pf
					}
					if a.t.Phase == 0 && prev.Actor != before {
						t.Fatalf("%s: %d actor steps before update %d (step %d), want %d", name, prev.Actor, k, a.t.Step, before)
					}
					var want algo.UpdateCounts
					switch {
					case a.t.Phase == 0:
						// The critic step of update k, after k−1 whole updates.
						want = algo.UpdateCounts{Critic: k, Actor: prev.Actor, Target: prev.Target}
					case c.spec.Name == "sac":
						want = algo.UpdateCounts{Critic: k, Actor: prev.Actor + 1, Target: prev.Target}
						if a.t.Phase == int(pf) {
							want.Target++ // target_network_frequency 1
						}
					default:
						want = algo.UpdateCounts{Critic: k, Actor: prev.Actor + 1, Target: prev.Target + 1}
					}
					if c.spec.Name == "sac" && a.t.Phase == 0 && uint64(a.t.Step)%pf != 0 {
						want.Target++
					}
					if got != want {
						t.Fatalf("%s: after phase %d of update %d (step %d): %+v, want %+v", name, a.t.Phase, k, a.t.Step, got, want)
					}
					prev = got
				}
				n := uint64(steps - 50)
				wantActor := n / pf
				if c.spec.Name == "sac" {
					wantActor = uint64(steps)/pf*pf - uint64(50)/pf*pf // actor steps at multiples of pf in (50, steps]
				}
				if prev.Critic != n || prev.Actor != wantActor {
					t.Errorf("%s: %+v after %d updates, want %d actor steps", name, prev, n, wantActor)
				}
			}
		}
	}
}
