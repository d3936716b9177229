package dqn

import (
	"math"
	"testing"

	"herd/algo"
	"herd/internal/rng"
)

// TestApeXEpsilon pins Ape-X's per-actor exploration (Horgan et al. 2018,
// §4.1): ε_i = ε^(1 + 7·i/(N−1)), from ε for actor 0 to ε⁸ for the last.
func TestApeXEpsilon(t *testing.T) {
	for _, c := range []struct {
		i, n int
		want float64
	}{{0, 8, 0.4}, {7, 8, math.Pow(0.4, 8)}, {3, 8, math.Pow(0.4, 4)}, {1, 3, math.Pow(0.4, 4.5)}, {0, 1, 0.4}} {
		if got := algo.ApeXEpsilon(0.4, c.i, c.n); math.Abs(got-c.want) > 1e-15 {
			t.Errorf("ε_%d of %d = %v, want %v", c.i, c.n, got, c.want)
		}
	}
}

// TestSamplerActorEpsilon checks that a sampler told its actor explores at
// that actor's ε_i whatever the schedule's step, and that without
// apex_epsilon it keeps the schedule.
func TestSamplerActorEpsilon(t *testing.T) {
	random := func(cfg *Config, actor int) float64 {
		ps := testPieces(t, cfg)
		s, err := ps.NewSampler(1, rng.New(1, "test", actor))
		if err != nil {
			t.Fatal(err)
		}
		s.(algo.ActorExplorer).SetActor(actor, 4)
		// Q-values that make action 1 greedy: a random draw picks 0 half
		// the time.
		var acts algo.Acts
		zeros := 0
		const n = 40000
		for range n {
			s.SampleTo(&acts, []float32{0, 1}, 1, 0) // step 0: the schedule's ε is start_e = 1
			if acts.Actions[0] == 0 {
				zeros++
			}
		}
		return 2 * float64(zeros) / n
	}
	cfg := NewConfig()
	cfg.ApeXEpsilon = 0.4
	for actor := range 4 {
		want := algo.ApeXEpsilon(0.4, actor, 4)
		if got := random(cfg, actor); math.Abs(got-want) > 0.02 {
			t.Errorf("actor %d explores at %.3f, want ε_i = %.3f", actor, got, want)
		}
	}
	if got := random(NewConfig(), 3); got < 0.95 {
		t.Errorf("without apex_epsilon the schedule's ε = 1 became %.3f", got)
	}
}

// TestApeXSyncStepsConfig: Ape-X actors copy the learner's weights every
// 400 env steps by default (Horgan et al. 2018, every 400 frames), 0 asks
// for every update, and a negative period is refused.
func TestApeXSyncStepsConfig(t *testing.T) {
	if got := NewConfig().ApeXSyncSteps; got != 400 {
		t.Errorf("default apex_sync_steps %d, want 400", got)
	}
	for _, c := range []struct {
		n  int
		ok bool
	}{{400, true}, {0, true}, {-1, false}} {
		cfg := NewConfig()
		cfg.ApeXSyncSteps = c.n
		if err := cfg.Validate(algo.Header{}); (err == nil) != c.ok {
			t.Errorf("apex_sync_steps %d: %v", c.n, err)
		}
	}
}
