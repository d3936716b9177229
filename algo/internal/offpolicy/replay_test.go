package offpolicy

import (
	"errors"
	"math"
	"strings"
	"testing"

	"herd/algo"
	"herd/env"
	"herd/internal/rng"
	"herd/replay"
	"herd/sample"
)

// oneEnvBatch is a one-env step result with reward r ending (or not) the
// episode, next observation next.
func oneEnvBatch(next []float32, r float32, term, trunc bool) *env.Batch {
	b := &env.Batch{ObsDim: len(next), Obs: make([]float32, len(next)), Rewards: []float32{r},
		Terminated: []bool{term}, Truncated: []bool{trunc}, Infos: make([]env.Info, 1), FinalObs: append([]float32(nil), next...)}
	if !term && !trunc {
		copy(b.Obs, next)
	}
	return b
}

// TestReplayNStepDiscountRoundTrip assembles one truncated 2-step episode
// with n = 3 and checks that Sample returns the stripped observations, the
// n-step rewards and the per-transition discounts γ^m.
func TestReplayNStepDiscountRoundTrip(t *testing.T) {
	const gamma = 0.5
	r, err := NewReplay(ReplayConfig{Capacity: 8, ObsDim: 2, ActDim: 1, NSteps: 3, Gamma: gamma})
	if err != nil {
		t.Fatal(err)
	}
	asm, err := NewAssembler(1, 3, gamma, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	var tr sample.Transitions
	// Episode: s0 -a0,r=1-> s1 -a1,r=2-> s2 (truncated).
	if err := asm.Add(&tr, []float32{0, 0}, []float32{0}, oneEnvBatch([]float32{1, 1}, 1, false, false)); err != nil {
		t.Fatal(err)
	}
	if tr.N != 0 {
		t.Fatalf("%d transitions after one step of a 3-step return, want 0", tr.N)
	}
	if err := asm.Add(&tr, []float32{1, 1}, []float32{1}, oneEnvBatch([]float32{2, 2}, 2, false, true)); err != nil {
		t.Fatal(err)
	}
	if err := r.Add(&tr); err != nil {
		t.Fatal(err)
	}
	if r.Len() != 2 {
		t.Fatalf("Len = %d after truncation, want 2", r.Len())
	}
	// Sample many times; every draw must be one of the two transitions.
	g := rng.New(1, "test", 0)
	seen := map[float32]bool{}
	var mb algo.Minibatch
	for range 20 {
		if err := r.Sample(&mb, 2, 0, g); err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			s0 := mb.Obs[2*i]
			var wantR, wantD float32
			switch s0 {
			case 0:
				wantR, wantD = 1+gamma*2, gamma*gamma
			case 1:
				wantR, wantD = 2, gamma
			default:
				t.Fatalf("sampled obs %v", mb.Obs[2*i:2*i+2])
			}
			seen[s0] = true
			if mb.Rewards[i] != wantR || math.Abs(float64(mb.Discounts[i]-wantD)) > 1e-7 ||
				mb.NextObs[2*i] != 2 || mb.NextObs[2*i+1] != 2 || mb.Dones[i] != 0 || mb.Weights[i] != 1 {
				t.Errorf("transition from %v: reward %v discount %v next %v done %v weight %v; want %v %v [2 2] 0 1",
					s0, mb.Rewards[i], mb.Discounts[i], mb.NextObs[2*i:2*i+2], mb.Dones[i], mb.Weights[i], wantR, wantD)
			}
		}
	}
	if len(seen) != 2 {
		t.Errorf("sampled only %v in 40 draws", seen)
	}
	if err := mb.Check(); err != nil {
		t.Errorf("minibatch shape: %v", err)
	}
}

// TestReplayPrioritizedUpdates checks that TD errors become priorities: a
// transition given a huge |δ| dominates the next samples; and that β
// anneals with the step passed to Sample.
func TestReplayPrioritizedUpdates(t *testing.T) {
	r, err := NewReplay(ReplayConfig{Capacity: 16, ObsDim: 1, ActDim: 1, NSteps: 1, Gamma: 0.9,
		Prioritized: true, Alpha: 1, Beta: 0.4, Eps: 1e-6, BetaSteps: 100})
	if err != nil {
		t.Fatal(err)
	}
	tr := sample.NewTransitions(16, 1, 1)
	for i := range 16 {
		tr.Obs[i], tr.NextObs[i], tr.Discounts[i] = float32(i), float32(i+1), 0.9
	}
	tr.Dones[15] = 1
	if err := r.Add(tr); err != nil {
		t.Fatal(err)
	}
	g := rng.New(2, "test", 0)
	var mb algo.Minibatch
	if err := r.Sample(&mb, 16, 50, g); err != nil {
		t.Fatal(err)
	}
	if b := r.pri.Beta(); math.Abs(b-0.7) > 1e-12 {
		t.Errorf("β at step 50 of 100 = %v, want 0.7", b)
	}
	td := make([]float32, 16)
	for i := range td {
		if mb.Obs[i] == 7 {
			td[i] = 1000
		}
	}
	if err := r.UpdatePriorities(&mb, td); err != nil {
		t.Fatal(err)
	}
	if err := r.Sample(&mb, 16, 0, g); err != nil {
		t.Fatal(err)
	}
	n := 0
	for i := range 16 {
		if mb.Obs[i] == 7 {
			n++
		}
	}
	// Unless slot 7 was never drawn in the first sample, it now holds
	// almost all the mass.
	if n < 12 {
		t.Errorf("after giving obs 7 priority 1000, it was drawn %d of 16 times", n)
	}
	if err := r.UpdatePriorities(&mb, td[:3]); err == nil {
		t.Error("UpdatePriorities with the wrong length succeeded")
	}
	bad := ReplayConfig{Capacity: 16, ObsDim: 1, ActDim: 1, NSteps: 1, Gamma: 0.9, Prioritized: true, Alpha: 1, Beta: 0.4, BetaSteps: 10}
	rb, _ := NewReplay(bad)
	rb.cfg.Beta = 2 // an annealed β outside [0, 1] is the buffer's error
	_ = rb.Add(tr)
	if err := rb.Sample(&mb, 4, 0, g); !errors.Is(err, replay.ErrBeta) {
		t.Errorf("β = 2: %v, want replay.ErrBeta", err)
	}
}

// TestReplayAddRejectsBadTransitions: wrong widths, broken shapes and a
// discount other than γ in a one-step replay are errors, not corruption.
func TestReplayAddRejectsBadTransitions(t *testing.T) {
	r, err := NewReplay(ReplayConfig{Capacity: 8, ObsDim: 2, ActDim: 1, NSteps: 1, Gamma: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Add(sample.NewTransitions(1, 3, 1)); err == nil {
		t.Error("obs width 3 accepted by a width-2 replay")
	}
	tr := sample.NewTransitions(2, 2, 1)
	tr.Rewards = tr.Rewards[:1]
	if err := r.Add(tr); err == nil {
		t.Error("a short Rewards slice accepted")
	}
	tr = sample.NewTransitions(1, 2, 1)
	tr.Discounts[0] = 0.25
	if err := r.Add(tr); err == nil {
		t.Error("discount 0.25 accepted by a one-step replay with γ = 0.5")
	}
	if r.Len() != 0 {
		t.Errorf("rejected rows were stored: Len %d", r.Len())
	}
}

func TestNewReplayRejectsBadConfig(t *testing.T) {
	if _, err := NewReplay(ReplayConfig{Capacity: 8, ObsDim: 0, ActDim: 1, NSteps: 1}); err == nil {
		t.Error("ObsDim 0 accepted")
	}
	if _, err := NewReplay(ReplayConfig{Capacity: 0, ObsDim: 1, ActDim: 1, NSteps: 1}); !errors.Is(err, replay.ErrConfig) {
		t.Errorf("Capacity 0: %v, want replay.ErrConfig", err)
	}
	if _, err := NewAssembler(0, 1, 0.9, 1, 1); err == nil {
		t.Error("an assembler for 0 envs")
	}
}

// TestReplayGivenPriorities: Ape-X initial priorities are stored as given
// (not at the running maximum); NaN, negative and infinite ones, a wrong
// count, or any given to a uniform replay are refused before a row is
// stored.
func TestReplayGivenPriorities(t *testing.T) {
	r, err := NewReplay(ReplayConfig{Capacity: 8, ObsDim: 1, ActDim: 1, NSteps: 2, Gamma: 0.9,
		Prioritized: true, Alpha: 1, Beta: 0.4, Eps: 1e-6})
	if err != nil {
		t.Fatal(err)
	}
	tr := sample.NewTransitions(3, 1, 1)
	copy(tr.Discounts, []float32{0.81, 0.81, 0.9})
	if err := r.Add(tr); err != nil { // max priority (1 on an empty buffer)
		t.Fatal(err)
	}
	tr.Priorities = []float32{0.25, 7, 0.5}
	if err := r.Add(tr); err != nil {
		t.Fatal(err)
	}
	for i, want := range []float64{1, 1, 1, 0.25, 7, 0.5} {
		if got, _, err := r.pri.Priority(i); err != nil || math.Abs(got-want) > 1e-6 {
			t.Errorf("slot %d: priority %v (%v), want %v", i, got, err, want)
		}
	}
	for _, bad := range [][]float32{{1, float32(math.NaN()), 1}, {1, 1, -0.5}, {float32(math.Inf(1)), 1, 1}} {
		tr.Priorities = bad
		if err := r.Add(tr); !errors.Is(err, replay.ErrPriority) || !strings.Contains(err.Error(), "initial priority of transition") {
			t.Errorf("priorities %v: err %v, want replay.ErrPriority naming the row", bad, err)
		}
	}
	tr.Priorities = []float32{1, 1}
	if err := r.Add(tr); !errors.Is(err, sample.ErrShape) {
		t.Errorf("2 priorities for 3 rows: err %v, want sample.ErrShape", err)
	}
	if r.Len() != 6 {
		t.Errorf("refused batches stored rows: len %d, want 6", r.Len())
	}
	u, err := NewReplay(ReplayConfig{Capacity: 8, ObsDim: 1, ActDim: 1, NSteps: 2, Gamma: 0.9})
	if err != nil {
		t.Fatal(err)
	}
	tr.Priorities = []float32{1, 1, 1}
	if err := u.Add(tr); err == nil || !strings.Contains(err.Error(), "uniform replay") {
		t.Errorf("uniform replay with priorities: err %v", err)
	}
}
