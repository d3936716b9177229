package env

import (
	"errors"
	"slices"
	"sync"
	"testing"

	"herd/internal/rng"
)

// TestSplitVectorMatchesWhole: two parts of a simple_tag vector (the
// adversaries' rows and the good agent's), each stepped by its own
// goroutine, give exactly the rows of the whole vector stepped with the
// same joint actions; OnRound sees every part waiting.
func TestSplitVectorMatchesWhole(t *testing.T) {
	const id, envs, agents, steps = "mpe/simple_tag_v3?agent_id=true&max_cycles=7", 3, 4, 40
	whole, err := MakeVector(id, envs*agents, Sync, WithEpisodeStatistics())
	if err != nil {
		t.Fatal(err)
	}
	defer whole.Close()
	v, err := MakeVector(id, envs*agents, Sync, WithEpisodeStatistics())
	if err != nil {
		t.Fatal(err)
	}
	var rows [2][]int
	for i := range envs {
		for j := range agents {
			k := 0
			if j == agents-1 { // agent_0, the good one, comes last
				k = 1
			}
			rows[k] = append(rows[k], i*agents+j)
		}
	}
	var rounds, resets int
	parts, err := SplitVector(v, rows[:], func(reset bool) {
		rounds++
		if reset {
			resets++
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	// The joint actions of each step, drawn up front; each part sends its
	// rows of them.
	acts := make([][]float32, steps)
	r := rng.New(1, "test", 0)
	for s := range acts {
		acts[s] = make([]float32, envs*agents)
		for i := range acts[s] {
			acts[s][i] = float32(r.IntN(5))
		}
	}
	type rowResult struct {
		obs              []float32
		rew              float32
		term, trunc, eps bool
	}
	got := make([][][]rowResult, 2) // part, step, row
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for k, p := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer p.Close()
			if _, err := p.Reset(5); err != nil {
				errs[k] = err
				return
			}
			a := make([]float32, len(rows[k]))
			for s := range steps {
				for j, row := range rows[k] {
					a[j] = acts[s][row]
				}
				b, err := p.Step(a)
				if err != nil {
					errs[k] = err
					return
				}
				var res []rowResult
				for j := range rows[k] {
					res = append(res, rowResult{slices.Clone(b.ObsRow(j)), b.Rewards[j], b.Terminated[j], b.Truncated[j], b.Infos[j].HasEpisode})
				}
				got[k] = append(got[k], res)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if rounds != steps+1 || resets != 1 {
		t.Errorf("OnRound: %d rounds, %d resets; want %d and 1", rounds, resets, steps+1)
	}
	if _, err := whole.Reset(5); err != nil {
		t.Fatal(err)
	}
	ended := 0
	for s := range steps {
		b, err := whole.Step(acts[s])
		if err != nil {
			t.Fatal(err)
		}
		for k := range parts {
			for j, row := range rows[k] {
				g := got[k][s][j]
				if !slices.Equal(g.obs, b.ObsRow(row)) || g.rew != b.Rewards[row] || g.term != b.Terminated[row] ||
					g.trunc != b.Truncated[row] || g.eps != b.Infos[row].HasEpisode {
					t.Fatalf("step %d part %d row %d (whole row %d) differs from the whole vector", s, k, j, row)
				}
				if g.eps {
					ended++
				}
			}
		}
	}
	if ended == 0 {
		t.Fatal("no episode ended: the test does not cover the autoreset")
	}
}

// TestSplitVectorPartEnds: a part that closes while another waits ends
// the split with ErrPartEnded instead of a hang; bad row groups are refused.
func TestSplitVectorPartEnds(t *testing.T) {
	v, err := MakeVector("mpe/simple_spread_v3", 3, Sync)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][][]int{{{0, 1}}, {{0, 1}, {1, 2}}, {{0, 1, 2}, {}}, {{0, 1, 3}, {2}}} {
		if _, err := SplitVector(v, bad, nil); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("rows %v: err %v, want ErrInvalidOption", bad, err)
		}
	}
	parts, err := SplitVector(v, [][]int{{0, 2}, {1}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() {
		_, err := parts[0].Reset(1)
		done <- err
	}()
	parts[1].Close()
	if err := <-done; !errors.Is(err, ErrPartEnded) {
		t.Fatalf("waiting part: err %v, want ErrPartEnded", err)
	}
	if _, err := parts[0].Step([]float32{0, 0}); !errors.Is(err, ErrPartEnded) {
		t.Fatalf("later call: err %v, want ErrPartEnded", err)
	}
	if err := parts[0].Close(); err != nil {
		t.Fatal(err)
	}
}
