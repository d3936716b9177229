package offpolicy

import (
	"errors"
	"math"
	"testing"

	"herd/internal/rng"
	"herd/replay"
)

// TestReplayNStepDiscountRoundTrip stores one truncated 2-step episode with
// n = 3 and checks that Sample returns the stripped observations, the
// n-step rewards and the per-transition discounts γ^m.
func TestReplayNStepDiscountRoundTrip(t *testing.T) {
	const gamma = 0.5
	r, err := NewReplay(ReplayConfig{Capacity: 8, ObsDim: 2, ActDim: 1, NumEnvs: 1, NSteps: 3, Gamma: gamma})
	if err != nil {
		t.Fatal(err)
	}
	// Episode: s0 -a0,r=1-> s1 -a1,r=2-> s2 (truncated).
	if err := r.Store(0, []float32{0, 0}, []float32{0}, 1, []float32{1, 1}, false, false); err != nil {
		t.Fatal(err)
	}
	if r.Len() != 0 {
		t.Fatalf("Len = %d after one step of a 3-step return, want 0", r.Len())
	}
	if err := r.Store(0, []float32{1, 1}, []float32{1}, 2, []float32{2, 2}, false, true); err != nil {
		t.Fatal(err)
	}
	if r.Len() != 2 {
		t.Fatalf("Len = %d after truncation, want 2", r.Len())
	}
	// Sample many times; every draw must be one of the two transitions.
	g := rng.New(1, "test", 0)
	seen := map[float32]bool{}
	for range 20 {
		if err := r.Sample(2, g); err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			s0 := r.Obs[2*i]
			var wantR, wantD float32
			switch s0 {
			case 0:
				wantR, wantD = 1+gamma*2, gamma*gamma
			case 1:
				wantR, wantD = 2, gamma
			default:
				t.Fatalf("sampled obs %v", r.Obs[2*i:2*i+2])
			}
			seen[s0] = true
			if r.Reward[i] != wantR || math.Abs(float64(r.Discount[i]-wantD)) > 1e-7 ||
				r.NextObs[2*i] != 2 || r.NextObs[2*i+1] != 2 || r.NotDone[i] != 1 || r.Weight[i] != 1 {
				t.Errorf("transition from %v: reward %v discount %v next %v notDone %v weight %v; want %v %v [2 2] 1 1",
					s0, r.Reward[i], r.Discount[i], r.NextObs[2*i:2*i+2], r.NotDone[i], r.Weight[i], wantR, wantD)
			}
		}
	}
	if len(seen) != 2 {
		t.Errorf("sampled only %v in 40 draws", seen)
	}
}

// TestReplayPrioritizedUpdates checks that TD errors become priorities: a
// transition given a huge |δ| dominates the next samples.
func TestReplayPrioritizedUpdates(t *testing.T) {
	r, err := NewReplay(ReplayConfig{Capacity: 16, ObsDim: 1, ActDim: 1, NumEnvs: 1, NSteps: 1, Gamma: 0.9,
		Prioritized: true, Alpha: 1, Beta: 0.4, Eps: 1e-6})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 16 {
		if err := r.Store(0, []float32{float32(i)}, []float32{0}, 0, []float32{float32(i + 1)}, i == 15, false); err != nil {
			t.Fatal(err)
		}
	}
	g := rng.New(2, "test", 0)
	if err := r.Sample(16, g); err != nil {
		t.Fatal(err)
	}
	td := make([]float32, 16)
	for i := range td {
		if r.Obs[i] == 7 {
			td[i] = 1000
		}
	}
	if err := r.UpdatePriorities(td); err != nil {
		t.Fatal(err)
	}
	if err := r.Sample(16, g); err != nil {
		t.Fatal(err)
	}
	n := 0
	for i := range 16 {
		if r.Obs[i] == 7 {
			n++
		}
	}
	// Unless slot 7 was never drawn in the first sample, it now holds
	// almost all the mass.
	if n < 12 {
		t.Errorf("after giving obs 7 priority 1000, it was drawn %d of 16 times", n)
	}
	if err := r.UpdatePriorities(td[:3]); err == nil {
		t.Error("UpdatePriorities with the wrong length succeeded")
	}
	if err := r.SetBeta(2); !errors.Is(err, replay.ErrBeta) {
		t.Errorf("SetBeta(2) = %v, want replay.ErrBeta", err)
	}
}

func TestNewReplayRejectsBadConfig(t *testing.T) {
	if _, err := NewReplay(ReplayConfig{Capacity: 8, ObsDim: 0, ActDim: 1, NumEnvs: 1, NSteps: 1}); err == nil {
		t.Error("ObsDim 0 accepted")
	}
	if _, err := NewReplay(ReplayConfig{Capacity: 0, ObsDim: 1, ActDim: 1, NumEnvs: 1, NSteps: 1}); !errors.Is(err, replay.ErrConfig) {
		t.Errorf("Capacity 0: %v, want replay.ErrConfig", err)
	}
}
