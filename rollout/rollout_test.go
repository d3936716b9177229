package rollout_test

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"herd/algo"
	"herd/env"
	"herd/rollout"
	"herd/sample"
)

// alternate is a test policy: env i takes action (i + step/n) mod 2, with
// log-prob −1 and value 0.5; it records the per-env resets it is told of.
type alternate struct {
	resets []int
	short  bool // give one action too few
	// shortStats gives every action but one log-prob and value too few,
	// which only the loop, not the envs, can notice.
	shortStats bool
}

func (p *alternate) Act(acts *algo.Acts, _ []float32, n int, step int64) error {
	m := n
	if p.short {
		m--
	}
	acts.Actions, acts.EnvActions = acts.Actions[:0], acts.EnvActions[:0]
	acts.LogProbs, acts.Values = acts.LogProbs[:0], acts.Values[:0]
	for i := range m {
		a := float32((int64(i) + step/int64(n)) % 2)
		acts.Actions = append(acts.Actions, a)
		acts.EnvActions = append(acts.EnvActions, a)
		if p.shortStats && i == m-1 {
			break
		}
		acts.LogProbs = append(acts.LogProbs, -1)
		acts.Values = append(acts.Values, 0.5)
	}
	return nil
}

func (p *alternate) ResetEnv(i int) { p.resets = append(p.resets, i) }

func (p *alternate) Values(dst, _ []float32, n int) ([]float32, error) {
	dst = dst[:0]
	for range n {
		dst = append(dst, 0.5)
	}
	return dst, nil
}

// oneStep is a 1-step assembler: (s, a, r, s') per env, s' the final
// observation where an episode ended.
type oneStep struct{}

func (oneStep) Add(dst *sample.Transitions, obs, actions []float32, b *env.Batch) error {
	d := b.ObsDim
	dst.ObsDim, dst.ActDim = d, 1
	for i := range len(b.Rewards) {
		next := b.Obs[i*d : (i+1)*d]
		if b.Done(i) {
			next = b.FinalObsRow(i)
			if b.Infos[i].HasEpisode {
				dst.Episodes = append(dst.Episodes, sample.Episode{Return: b.Infos[i].Episode.Return, Length: b.Infos[i].Episode.Length})
			}
		}
		done := float32(0)
		if b.Terminated[i] {
			done = 1
		}
		dst.Obs = append(dst.Obs, obs[i*d:(i+1)*d]...)
		dst.Actions = append(dst.Actions, actions[i])
		dst.Rewards = append(dst.Rewards, b.Rewards[i])
		dst.NextObs = append(dst.NextObs, next...)
		dst.Discounts = append(dst.Discounts, 0.99)
		dst.Dones = append(dst.Dones, done)
		dst.N++
	}
	return nil
}

func cartPoles(t testing.TB, n int) env.Vector {
	v, err := env.MakeVector("CartPole-v1", n, env.Sync, env.WithEpisodeStatistics())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	return v
}

// TestTransitionsStep: every Step appends one transition per env (1-step
// assembler), s' is the final observation where an episode ended, the
// policy hears of exactly the envs whose episodes ended, and the episodes
// are in the batch.
func TestTransitionsStep(t *testing.T) {
	const n = 3
	envs := cartPoles(t, n)
	asm := oneStep{}
	p := &alternate{}
	loop, err := rollout.NewTransitions(envs, p, asm)
	if err != nil {
		t.Fatal(err)
	}
	if err := loop.Reset(7); err != nil {
		t.Fatal(err)
	}
	var tr sample.Transitions
	var dones, episodes int
	for s := range 200 {
		rollout.ClearTransitions(&tr)
		prev := append([]float32(nil), loop.Obs...)
		before := len(p.resets)
		if err := loop.Step(int64(s*n), &tr); err != nil {
			t.Fatal(err)
		}
		if tr.N != n {
			t.Fatalf("step %d: %d transitions, want %d", s, tr.N, n)
		}
		b := loop.Batch
		var want []int
		for i := range n {
			if b.Done(i) {
				want = append(want, i)
				if tr.NextObs[i*4] != b.FinalObsRow(i)[0] {
					t.Fatalf("step %d env %d: s' %v, want the final observation %v", s, i, tr.NextObs[i*4:i*4+4], b.FinalObsRow(i))
				}
			}
			if tr.Obs[i*4] != prev[i*4] {
				t.Fatalf("step %d env %d: s %v, want %v", s, i, tr.Obs[i*4:i*4+4], prev[i*4:i*4+4])
			}
		}
		got := p.resets[before:]
		if len(got) != len(want) {
			t.Fatalf("step %d: resets %v, want %v", s, got, want)
		}
		for k := range got {
			if got[k] != want[k] {
				t.Fatalf("step %d: resets %v, want %v", s, got, want)
			}
		}
		dones += len(want)
		episodes += len(tr.Episodes)
	}
	if dones == 0 || episodes != dones {
		t.Fatalf("%d episodes ended, %d reported", dones, episodes)
	}
}

// TestBadActions: a policy that gives the wrong number of actions is an
// error naming the counts, not a panic, in both loops.
func TestBadActions(t *testing.T) {
	loop, err := rollout.NewTransitions(cartPoles(t, 2), &alternate{short: true}, oneStep{})
	if err != nil {
		t.Fatal(err)
	}
	if err := loop.Reset(1); err != nil {
		t.Fatal(err)
	}
	var tr sample.Transitions
	if err := loop.Step(0, &tr); err == nil || !strings.Contains(err.Error(), "for 2 envs") {
		t.Fatalf("transitions: %v", err)
	}
	seg := sample.NewSegment(4, 2, 4, 1)
	s := rollout.NewSegments(0, cartPoles(t, 2), &alternate{short: true}, 0.99)
	if err := s.Reset(1); err != nil {
		t.Fatal(err)
	}
	if err := s.Collect(seg); err == nil || !strings.Contains(err.Error(), "for 2 envs") {
		t.Fatalf("segments: %v", err)
	}
	s = rollout.NewSegments(0, cartPoles(t, 2), &alternate{shortStats: true}, 0.99)
	if err := s.Reset(1); err != nil {
		t.Fatal(err)
	}
	if err := s.Collect(seg); err == nil || !strings.Contains(err.Error(), "1 log-probs and 1 values for 2 envs") {
		t.Fatalf("segments, a log-prob and a value short: %v", err)
	}
}

// TestSegmentsBootstrap: a truncated episode's reward gains γ·V(final
// observation) (MountainCar: −1 per step, cut at 200 steps), a terminated
// one's does not (CartPole falling), and the episodes are recorded.
func TestSegmentsBootstrap(t *testing.T) {
	const n, T, gamma = 2, 450, float32(0.9)
	for _, c := range []struct {
		id             string
		r              float32
		wantTruncation bool
	}{{"MountainCar-v0", -1, true}, {"CartPole-v1", 1, false}} {
		v, err := env.MakeVector(c.id, n, env.Sync, env.WithEpisodeStatistics())
		if err != nil {
			t.Fatal(err)
		}
		defer v.Close()
		s := rollout.NewSegments(0, v, &alternate{}, gamma)
		if err := s.Reset(3); err != nil {
			t.Fatal(err)
		}
		seg := sample.NewSegment(T, n, v.ObservationSpace().Dim(), 1)
		if err := s.Collect(seg); err != nil {
			t.Fatal(err)
		}
		var ends int
		for k := range T * n {
			want := c.r
			if seg.Dones[k] == 1 {
				ends++
				if c.wantTruncation {
					want += gamma * 0.5
				}
			}
			if seg.Rewards[k] != want {
				t.Fatalf("%s row %d (done %v): reward %v, want %v", c.id, k, seg.Dones[k], seg.Rewards[k], want)
			}
		}
		if ends == 0 || ends != len(seg.Episodes) {
			t.Fatalf("%s: %d ends, %d episodes", c.id, ends, len(seg.Episodes))
		}
		for _, v := range seg.LastValues {
			if v != 0.5 {
				t.Fatalf("last values %v", seg.LastValues)
			}
		}
	}
}

func BenchmarkTransitions(b *testing.B) {
	const n = 8
	envs := cartPoles(b, n)
	loop, _ := rollout.NewTransitions(envs, &alternate{}, oneStep{})
	if err := loop.Reset(1); err != nil {
		b.Fatal(err)
	}
	var tr sample.Transitions
	b.ReportAllocs()
	for i := range b.N {
		rollout.ClearTransitions(&tr)
		if err := loop.Step(int64(i*n), &tr); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSegments(b *testing.B) {
	const n, T = 8, 128
	s := rollout.NewSegments(0, cartPoles(b, n), &alternate{}, 0.99)
	if err := s.Reset(1); err != nil {
		b.Fatal(err)
	}
	seg := sample.NewSegment(T, n, 4, 1)
	b.ReportAllocs()
	for range b.N {
		if err := s.Collect(seg); err != nil {
			b.Fatal(err)
		}
	}
}

// byObs is a test policy whose every output depends on the observation
// it acts on (CartPole: push towards the pole's fall), so that acting on
// the wrong rows shows; as a Pipelined policy it checks that each block's
// request was prefetched with the observations it then acts on, and acts
// on version 10 − block.
type byObs struct {
	prefetched map[int][]float32
	ver        uint64
	errs       []string
}

func (p *byObs) Act(acts *algo.Acts, obs []float32, n int, _ int64) error {
	acts.Actions, acts.EnvActions = acts.Actions[:0], acts.EnvActions[:0]
	acts.LogProbs, acts.Values = acts.LogProbs[:0], acts.Values[:0]
	for i := range n {
		o := obs[i*4 : (i+1)*4]
		a := float32(0)
		if o[2] > 0 {
			a = 1
		}
		acts.Actions = append(acts.Actions, a)
		acts.EnvActions = append(acts.EnvActions, a)
		acts.LogProbs = append(acts.LogProbs, o[0])
		acts.Values = append(acts.Values, o[1])
	}
	return nil
}

func (p *byObs) Values(dst, obs []float32, n int) ([]float32, error) {
	dst = dst[:0]
	for i := range n {
		dst = append(dst, obs[i*4+3])
	}
	return dst, nil
}

func (p *byObs) Prefetch(b int, obs []float32) {
	if _, ok := p.prefetched[b]; ok {
		p.errs = append(p.errs, "block prefetched twice")
	}
	p.prefetched[b] = append([]float32(nil), obs...)
}

func (p *byObs) ActBlock(b int, acts *algo.Acts, obs []float32, n int, step int64) error {
	want, ok := p.prefetched[b]
	if !ok || !slices.Equal(want, obs) {
		p.errs = append(p.errs, "acted on observations other than those prefetched")
	}
	delete(p.prefetched, b)
	p.ver = uint64(10 + b)
	return p.Act(acts, obs, n, step)
}

func (p *byObs) ActVersion() uint64 { return p.ver }

// TestBlockSegmentsMatchOneVector: envs stepped in blocks by a pipelined
// policy give the segments of one vector of all the envs (truncation
// bootstraps, episodes and next observations included), each step records
// the oldest version its blocks acted on, and every block's request is
// prefetched with the observations acted on.
func TestBlockSegmentsMatchOneVector(t *testing.T) {
	const n, T, segs = 4, 16, 3
	envs := func() []env.Env {
		es := make([]env.Env, n)
		for j := range es {
			e, err := env.Make("CartPole-v1", env.WithEpisodeStatistics(), env.WithMaxEpisodeSteps(9))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { e.Close() })
			es[j] = e
		}
		return es
	}
	start := func(es []env.Env) []float32 {
		var obs []float32
		for j, e := range es {
			o, _, err := e.Reset(int64(j + 11))
			if err != nil {
				t.Fatal(err)
			}
			obs = append(obs, o...)
		}
		return obs
	}
	run := func(blocks int) []*sample.Segment {
		es := envs()
		obs := start(es)
		var s *rollout.Segments
		p := &byObs{prefetched: map[int][]float32{}}
		if blocks == 0 {
			v, err := env.NewSyncVectorOf(es)
			if err != nil {
				t.Fatal(err)
			}
			s = rollout.NewSegments(0, v, p, 0.9)
		} else {
			k := n / blocks
			var vs []env.Vector
			for b := range blocks {
				v, err := env.NewSyncVectorOf(es[b*k : (b+1)*k])
				if err != nil {
					t.Fatal(err)
				}
				vs = append(vs, v)
			}
			var err error
			if s, err = rollout.NewBlockSegments(0, vs, p, 0.9); err != nil {
				t.Fatal(err)
			}
		}
		s.Start(obs)
		var out []*sample.Segment
		for range segs {
			seg := sample.NewSegment(T, n, 4, 1)
			seg.Versions = make([]uint64, T)
			if err := s.Collect(seg); err != nil {
				t.Fatal(err)
			}
			out = append(out, seg)
		}
		if len(p.errs) > 0 || len(p.prefetched) != 0 {
			t.Errorf("%d blocks: %v; %d requests in flight after the segments, want none", blocks, p.errs, len(p.prefetched))
		}
		return out
	}
	want := run(0)
	var truncated bool
	for _, seg := range want {
		for k, d := range seg.Dones {
			truncated = truncated || (d == 1 && seg.Rewards[k] != 1)
		}
	}
	if !truncated {
		t.Fatal("no truncation bootstrap in the segments: the test would not see one")
	}
	for _, blocks := range []int{1, 2, 4} {
		got := run(blocks)
		for i := range got {
			w := *want[i]
			w.Versions = slices.Repeat([]uint64{10}, T)
			if !reflect.DeepEqual(got[i], &w) {
				t.Errorf("%d blocks: segment %d differs from one vector's", blocks, i)
			}
		}
	}
}

// TestBlockSegmentsErrors: blocks of unequal size, and a Reset in place
// of the caller's resets, are errors.
func TestBlockSegmentsErrors(t *testing.T) {
	p := &byObs{prefetched: map[int][]float32{}}
	if _, err := rollout.NewBlockSegments(0, []env.Vector{cartPoles(t, 2), cartPoles(t, 1)}, p, 0.9); err == nil || !strings.Contains(err.Error(), "block 1 of 1 envs") {
		t.Errorf("unequal blocks: %v", err)
	}
	if _, err := rollout.NewBlockSegments(0, nil, p, 0.9); err == nil {
		t.Error("no blocks: no error")
	}
	s, err := rollout.NewBlockSegments(0, []env.Vector{cartPoles(t, 2), cartPoles(t, 2)}, p, 0.9)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Reset(1); err == nil || !strings.Contains(err.Error(), "Start") {
		t.Errorf("reset of blocks: %v", err)
	}
}

// counting is a recurrent test policy (rollout.StateKeeper): env i's state
// is the number of actions taken since its episode began, and its value
// for a truncation bootstrap is that count.
type counting struct {
	alternate
	state []float32
}

func (p *counting) Act(acts *algo.Acts, obs []float32, n int, step int64) error {
	p.StateTo(nil, n)
	for i := range n {
		p.state[i]++
	}
	return p.alternate.Act(acts, obs, n, step)
}

func (p *counting) ResetEnv(i int) { p.state[i] = 0 }

func (p *counting) StateDim() int { return 1 }

func (p *counting) StateTo(dst []float32, n int) []float32 {
	if len(p.state) != n {
		p.state = make([]float32, n)
	}
	return append(dst[:0], p.state...)
}

func (p *counting) EnvValue(i int, _ []float32) float32 { return p.state[i] }

// TestSegmentsCarryState: a recurrent policy's states at each segment's
// start land in seg.State, an episode's end zeroes its env's state, and a
// truncation is bootstrapped from the env's own state (MountainCar's
// time limit of 200 steps cuts every episode of the alternating policy).
func TestSegmentsCarryState(t *testing.T) {
	const n, T, gamma = 2, 450, float32(0.9)
	v, err := env.MakeVector("MountainCar-v0", n, env.Sync, env.WithEpisodeStatistics())
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	p := &counting{}
	s := rollout.NewSegments(0, v, p, gamma)
	if err := s.Reset(3); err != nil {
		t.Fatal(err)
	}
	seg := sample.NewSegment(T, n, v.ObservationSpace().Dim(), 1)
	for k, want := range [][]float32{{0, 0}, {50, 50}} {
		if err := s.Collect(seg); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(seg.State) != fmt.Sprint(want) {
			t.Fatalf("segment %d starts from %v, want %v", k, seg.State, want)
		}
		ends := 0
		for r := range T * n {
			if seg.Dones[r] == 1 {
				ends++
				if want := -1 + gamma*200; seg.Rewards[r] != want {
					t.Fatalf("segment %d row %d: truncated reward %v, want %v (the env's state 200)", k, r, seg.Rewards[r], want)
				}
			}
		}
		if ends == 0 {
			t.Fatalf("segment %d: no episode ended", k)
		}
	}
}

// byRow is a test policy whose V(s) is its env's row (rollout.RowValuer):
// env i's value is i + 1, whatever the observation.
type byRow struct{ alternate }

func (p *byRow) RowValue(i int, _ []float32) (float32, error) { return float32(i + 1), nil }

// TestSegmentsRowValues: a RowValuer bootstraps each truncation with its
// env's value, discounted by that env's Gammas entry, and Ended names the
// env of each recorded episode (MountainCar's time limit cuts every
// episode of the alternating policy at 200 steps).
func TestSegmentsRowValues(t *testing.T) {
	const n, T = 3, 450
	v, err := env.MakeVector("MountainCar-v0", n, env.Sync, env.WithEpisodeStatistics())
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	s := rollout.NewSegments(0, v, &byRow{}, 0.9)
	s.Gammas = []float32{0.5, 0.25, 0.125}
	if err := s.Reset(3); err != nil {
		t.Fatal(err)
	}
	seg := sample.NewSegment(T, n, v.ObservationSpace().Dim(), 1)
	if err := s.Collect(seg); err != nil {
		t.Fatal(err)
	}
	var ended []int
	for r := range T * n {
		i := r % n
		if seg.Dones[r] != 1 {
			continue
		}
		ended = append(ended, i)
		if want := -1 + s.Gammas[i]*float32(i+1); seg.Rewards[r] != want {
			t.Errorf("row %d (env %d): truncated reward %v, want %v", r, i, seg.Rewards[r], want)
		}
	}
	if len(ended) == 0 || !slices.Equal(s.Ended, ended) || len(s.Ended) != len(seg.Episodes) {
		t.Errorf("Ended %v for %d episodes; the truncated envs in order %v", s.Ended, len(seg.Episodes), ended)
	}
}
