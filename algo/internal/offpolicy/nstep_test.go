package offpolicy

import (
	"math"
	"testing"
)

// naiveNStep computes n-step transitions for one episode by the textbook
// definition, to check the ring-buffer version against (raft's quick tests
// check fast code against a naive one the same way).
func naiveNStep(n int, gamma float64, obs []float32, rewards []float32, terminated bool) []Transition {
	T := len(rewards)
	var out []Transition
	for t := 0; t < T; t++ {
		m := min(n, T-t)
		var ret float64
		for k := 0; k < m; k++ {
			ret += math.Pow(gamma, float64(k)) * float64(rewards[t+k])
		}
		out = append(out, Transition{
			Obs:      []float32{obs[t]},
			Action:   []float32{float32(t)},
			Reward:   float32(ret),
			NextObs:  []float32{obs[t+m]},
			Discount: float32(math.Pow(gamma, float64(m))),
			Done:     terminated && t+m == T,
		})
	}
	return out
}

func TestNStepMatchesDefinition(t *testing.T) {
	for _, n := range []int{1, 2, 3, 5} {
		for _, term := range []bool{true, false} {
			for _, T := range []int{1, 2, 4, 7} {
				obs := make([]float32, T+1)
				rew := make([]float32, T)
				for i := range obs {
					obs[i] = float32(100 + i)
				}
				for i := range rew {
					rew[i] = float32(i*i%5) - 1
				}
				want := naiveNStep(n, 0.9, obs, rew, term)
				s := NewNStep(n, 0.9, 1, 1)
				var got []Transition
				var tr Transition
				for i := 0; i < T; i++ {
					last := i == T-1
					s.Push([]float32{obs[i]}, []float32{float32(i)}, rew[i], []float32{obs[i+1]}, last && term, last && !term)
					for s.Pop(&tr) {
						// Copy: Pop's slices alias the ring.
						got = append(got, Transition{
							Obs: append([]float32(nil), tr.Obs...), Action: append([]float32(nil), tr.Action...),
							Reward: tr.Reward, NextObs: append([]float32(nil), tr.NextObs...), Discount: tr.Discount, Done: tr.Done,
						})
					}
				}
				if len(got) != len(want) {
					t.Fatalf("n=%d T=%d term=%v: %d transitions, want %d", n, T, term, len(got), len(want))
				}
				for i := range want {
					g, w := got[i], want[i]
					if g.Obs[0] != w.Obs[0] || g.Action[0] != w.Action[0] || g.NextObs[0] != w.NextObs[0] ||
						g.Done != w.Done || math.Abs(float64(g.Reward-w.Reward)) > 1e-5 ||
						math.Abs(float64(g.Discount-w.Discount)) > 1e-6 {
						t.Errorf("n=%d T=%d term=%v #%d: got %+v, want %+v", n, T, term, i, g, w)
					}
				}
				if s.Pending() != 0 {
					t.Errorf("n=%d T=%d: %d steps still pending after the episode ended", n, T, s.Pending())
				}
			}
		}
	}
}

// TestNStepTruncationBootstrapsFromFinalObs pins the truncation rule: the
// transitions cut by a time limit keep Done clear and point at the episode's
// final observation, and the next episode starts from an empty ring.
func TestNStepTruncationBootstrapsFromFinalObs(t *testing.T) {
	s := NewNStep(3, 0.5, 1, 1)
	var tr Transition
	s.Push([]float32{0}, []float32{0}, 1, []float32{1}, false, false)
	if s.Pop(&tr) {
		t.Fatal("a 3-step transition was ready after one step")
	}
	s.Push([]float32{1}, []float32{1}, 1, []float32{99}, false, true) // truncated; 99 is the final obs
	var n int
	for s.Pop(&tr) {
		n++
		if tr.Done || tr.NextObs[0] != 99 {
			t.Errorf("truncated transition %d: Done=%v NextObs=%v, want false, 99", n, tr.Done, tr.NextObs)
		}
	}
	if n != 2 {
		t.Fatalf("popped %d transitions on truncation, want 2", n)
	}
	// New episode: the first push must not see the old steps.
	s.Push([]float32{5}, []float32{0}, 2, []float32{6}, true, false)
	if !s.Pop(&tr) || tr.Obs[0] != 5 || tr.Reward != 2 || !tr.Done || tr.Discount != 0.5 {
		t.Errorf("after reset got %+v, want obs 5, reward 2, done, discount 0.5", tr)
	}
}

func TestNStepNoAllocs(t *testing.T) {
	s := NewNStep(3, 0.99, 4, 1)
	o, a := make([]float32, 4), []float32{1}
	var tr Transition
	allocs := testing.AllocsPerRun(1000, func() {
		s.Push(o, a, 1, o, false, false)
		for s.Pop(&tr) {
		}
	})
	if allocs != 0 {
		t.Errorf("Push+Pop allocates %.1f times, want 0", allocs)
	}
}

func TestLinearSchedule(t *testing.T) {
	cases := []struct {
		duration, t int
		want        float64
	}{{100, 0, 1}, {100, 50, 0.525}, {100, 100, 0.05}, {100, 1000, 0.05}, {0, 0, 0.05}, {100, -5, 1}}
	for _, c := range cases {
		if got := LinearSchedule(1, 0.05, c.duration, c.t); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("LinearSchedule(1, 0.05, %d, %d) = %v, want %v", c.duration, c.t, got, c.want)
		}
	}
}

func BenchmarkNStepPushPop(b *testing.B) {
	s := NewNStep(3, 0.99, 4, 1)
	o, a := make([]float32, 4), []float32{1}
	var tr Transition
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		s.Push(o, a, 1, o, i%200 == 199, false)
		for s.Pop(&tr) {
		}
	}
}

func TestCrossed(t *testing.T) {
	cases := []struct {
		prev, cur, every int64
		want             bool
	}{{9, 10, 10, true}, {10, 11, 10, false}, {8, 12, 10, true}, {0, 4, 5, false}, {3, 25, 10, true}, {1, 2, 0, false}}
	for _, c := range cases {
		if got := Crossed(c.prev, c.cur, c.every); got != c.want {
			t.Errorf("Crossed(%d, %d, %d) = %v, want %v", c.prev, c.cur, c.every, got, c.want)
		}
	}
}
