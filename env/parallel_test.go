package env

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"herd/env/mpe"
)

// countdown is a small Parallel for the tests: agent k leaves (terminated)
// after k+1 steps; observation [k, t, last action], reward = action + k.
type countdown struct {
	possible []string
	live     []string
	t        int
	seed     int64
	obs      map[string][]float32
	rew      map[string]float64
	term     map[string]bool
	trunc    map[string]bool
	infos    map[string]Info
}

func newCountdown(n int) *countdown {
	c := &countdown{obs: map[string][]float32{}, rew: map[string]float64{}, term: map[string]bool{},
		trunc: map[string]bool{}, infos: map[string]Info{}}
	for k := range n {
		c.possible = append(c.possible, fmt.Sprintf("a%d", k))
	}
	return c
}

func (c *countdown) PossibleAgents() []string { return c.possible }
func (c *countdown) Agents() []string         { return c.live }
func (c *countdown) ObservationSpace(a string) (Space, error) {
	if !slices.Contains(c.possible, a) {
		return nil, fmt.Errorf("%w: no agent %s", ErrInvalidOption, a)
	}
	return UniformBox(-100, 100, 3), nil
}
func (c *countdown) ActionSpace(a string) (Space, error) {
	if !slices.Contains(c.possible, a) {
		return nil, fmt.Errorf("%w: no agent %s", ErrInvalidOption, a)
	}
	return Discrete{N: 3}, nil
}
func (c *countdown) Reset(seed int64) (map[string][]float32, map[string]Info, error) {
	if seed >= 0 {
		c.seed = seed
	}
	c.t = 0
	c.live = slices.Clone(c.possible)
	clear(c.obs)
	clear(c.infos)
	for k, a := range c.possible {
		c.obs[a] = []float32{float32(k), 0, -1}
		c.infos[a] = Info{}
	}
	return c.obs, c.infos, nil
}
func (c *countdown) Step(act map[string][]float32) (map[string][]float32, map[string]float64, map[string]bool, map[string]bool, map[string]Info, error) {
	if len(c.live) == 0 {
		return nil, nil, nil, nil, nil, ErrNeedsReset
	}
	if len(act) != len(c.live) {
		return nil, nil, nil, nil, nil, fmt.Errorf("%w: want %d actions", ErrInvalidAction, len(c.live))
	}
	for _, a := range c.live {
		if _, ok := act[a]; !ok {
			return nil, nil, nil, nil, nil, fmt.Errorf("%w: no action for %s", ErrInvalidAction, a)
		}
	}
	c.t++
	clear(c.obs)
	clear(c.rew)
	clear(c.term)
	clear(c.trunc)
	clear(c.infos)
	next := c.live[:0]
	for _, a := range slices.Clone(c.live) {
		k := slices.Index(c.possible, a)
		c.obs[a] = []float32{float32(k), float32(c.t), act[a][0]}
		c.rew[a] = float64(act[a][0]) + float64(k)
		c.term[a] = c.t >= k+1
		c.trunc[a] = false
		c.infos[a] = Info{}
		if !c.term[a] {
			next = append(next, a)
		}
	}
	c.live = next
	return c.obs, c.rew, c.term, c.trunc, c.infos, nil
}
func (c *countdown) Close() error { return nil }

var _ Parallel = (*countdown)(nil)
var _ Parallel = (*mpe.Env)(nil)

func TestParallelAgentsLeaveAndBadActions(t *testing.T) {
	p, err := MakeParallel("mpe/simple_spread_v3")
	if err != nil {
		t.Fatal(err)
	}
	e := p.(*mpe.Env)
	obs, _, err := p.Reset(3)
	if err != nil {
		t.Fatal(err)
	}
	if len(obs) != 3 || len(p.Agents()) != 3 {
		t.Fatalf("reset: %d observations, agents %v", len(obs), p.Agents())
	}
	before := e.State()
	zero := []float32{0}
	for _, bad := range []map[string][]float32{
		{"agent_0": zero, "agent_1": zero},                                   // missing
		{"agent_0": zero, "agent_1": zero, "agent_2": zero, "agent_9": zero}, // unknown
		{"agent_0": zero, "agent_1": zero, "agent_9": zero},                  // wrong name
		{"agent_0": zero, "agent_1": zero, "agent_2": {5}},                   // out of range
		{"agent_0": zero, "agent_1": zero, "agent_2": {1.5}},                 // not an integer
	} {
		if _, _, _, _, _, err := p.Step(bad); !errors.Is(err, ErrInvalidAction) {
			t.Fatalf("Step(%v) = %v, want ErrInvalidAction", bad, err)
		}
	}
	if fmt.Sprint(e.State()) != fmt.Sprint(before) {
		t.Fatal("a rejected step changed the world")
	}
	acts := map[string][]float32{"agent_0": {1}, "agent_1": {2}, "agent_2": {4}}
	for step := 1; step <= 25; step++ {
		_, rew, term, trunc, _, err := p.Step(acts)
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if len(rew) != 3 || term["agent_0"] {
			t.Fatalf("step %d: rewards %v terminations %v", step, rew, term)
		}
		if trunc["agent_1"] != (step == 25) || (len(p.Agents()) == 0) != (step == 25) {
			t.Fatalf("step %d: truncated %v, agents %v", step, trunc, p.Agents())
		}
	}
	if _, _, _, _, _, err := p.Step(acts); !errors.Is(err, ErrNeedsReset) {
		t.Fatalf("step after the end: %v, want ErrNeedsReset", err)
	}
	if _, err := p.ObservationSpace("nobody"); !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("ObservationSpace(nobody) = %v", err)
	}
}

func TestParallelIDKeywords(t *testing.T) {
	p, err := MakeParallel("mpe/simple_spread_v3?N=4&local_ratio=0.25&continuous_actions=true")
	if err != nil {
		t.Fatal(err)
	}
	if len(p.PossibleAgents()) != 4 {
		t.Fatalf("N=4 gave agents %v", p.PossibleAgents())
	}
	if s, _ := p.ActionSpace("agent_3"); s.Dim() != 5 {
		t.Fatalf("continuous action space %v", s)
	}
	for _, id := range []string{"mpe/simple_spread_v3?N=2.5", "mpe/simple_spread_v3?bogus=1",
		"mpe/simple_spread_v3?local_ratio=2", "mpe/simple_tag_v3?max_cycles=0", "mpe/nope"} {
		if _, err := MakeParallel(id); err == nil {
			t.Fatalf("MakeParallel(%q) accepted", id)
		}
	}
	if _, err := MakeVector("mpe/simple_spread_v3", 4, Sync); !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("4 rows of a 3-agent env: %v, want ErrInvalidOption", err)
	}
	// simple_tag's adversaries see 16 values, its prey 14: rows are padded.
	v, err := MakeVector("mpe/simple_tag_v3?agent_id=true", 8, Sync)
	if err != nil {
		t.Fatal(err)
	}
	if v.ObservationSpace().Dim() != 16+4 {
		t.Fatalf("simple_tag rows have %d values, want 16 + 4", v.ObservationSpace().Dim())
	}
}

func TestParallelVectorAutoreset(t *testing.T) {
	pv, err := NewParallelVector(2, func(int) (Parallel, error) { return newCountdown(3), nil })
	if err != nil {
		t.Fatal(err)
	}
	steps, err := pv.Reset(7)
	if err != nil {
		t.Fatal(err)
	}
	if len(steps[0].Agents) != 3 {
		t.Fatalf("agents after reset %v", steps[0].Agents)
	}
	act := func(i int) map[string][]float32 {
		m := map[string][]float32{}
		for _, a := range steps[i].Agents {
			m[a] = []float32{1}
		}
		return m
	}
	wantAgents := [][]string{{"a1", "a2"}, {"a2"}, {"a0", "a1", "a2"}}
	for k, want := range wantAgents {
		steps, err = pv.Step([]map[string][]float32{act(0), act(1)})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(steps[0].Agents, want) || steps[0].Done != (k == 2) {
			t.Fatalf("step %d: agents %v done %v, want %v", k+1, steps[0].Agents, steps[0].Done, want)
		}
	}
	// The ending step: a2 acted and left; its final obs is the last one
	// (t = 3), the new obs the reset one (t = 0).
	if got := steps[1].FinalObs["a2"]; got[1] != 3 {
		t.Fatalf("final obs %v", got)
	}
	if got := steps[1].Obs["a2"]; got[1] != 0 {
		t.Fatalf("obs after autoreset %v", got)
	}
	if !steps[1].Terminations["a2"] || steps[1].Rewards["a2"] != 3 {
		t.Fatalf("ending transition: term %v rewards %v", steps[1].Terminations, steps[1].Rewards)
	}
	bad := act(0)
	bad["a0"] = []float32{7}
	if _, err := pv.Step([]map[string][]float32{bad, act(1)}); !errors.Is(err, ErrInvalidAction) {
		t.Fatalf("bad action: %v", err)
	}
}

// TestFlatVectorRows checks the per-agent rows against the parallel env
// stepped directly, the one-hot id, and the dead rows of agents that leave
// early.
func TestFlatVectorRows(t *testing.T) {
	pv, err := NewParallelVector(1, func(int) (Parallel, error) { return newCountdown(3), nil })
	if err != nil {
		t.Fatal(err)
	}
	f, err := NewFlatVector(pv, FlatOptions{AgentID: true, EpisodeStatistics: true})
	if err != nil {
		t.Fatal(err)
	}
	if f.NumEnvs() != 3 || f.ObservationSpace().Dim() != 6 {
		t.Fatalf("rows %d, obs dim %d", f.NumEnvs(), f.ObservationSpace().Dim())
	}
	b, err := f.Reset(0)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.ObsRow(2); !slices.Equal(got, []float32{2, 0, -1, 0, 0, 1}) {
		t.Fatalf("row 2 after reset %v", got)
	}
	// Step 1: a0 leaves (terminated, return 2 = action 2 + k 0).
	b, err = f.Step([]float32{2, 1, 1})
	if err != nil {
		t.Fatal(err)
	}
	if !b.Terminated[0] || b.Rewards[0] != 2 || !b.Infos[0].HasEpisode || b.Infos[0].Episode.Return != 2 {
		t.Fatalf("row 0: term %v reward %v info %+v", b.Terminated[0], b.Rewards[0], b.Infos[0])
	}
	if got := b.FinalObsRow(0); !slices.Equal(got, []float32{0, 1, 2, 1, 0, 0}) {
		t.Fatalf("row 0 final obs %v", got)
	}
	if got := b.ObsRow(0); !slices.Equal(got, make([]float32, 6)) {
		t.Fatalf("dead row obs %v, want zeros", got)
	}
	// Step 2: row 0 is dead (its action 2 ignored), a1 leaves.
	b, err = f.Step([]float32{2, 0, 0})
	if err != nil {
		t.Fatal(err)
	}
	if b.Rewards[0] != 0 || b.Done(0) || !b.Terminated[1] || b.Infos[1].Episode.Return != 3 || f.DeadRowSteps() != 1 {
		t.Fatalf("step 2: rewards %v done0 %v term1 %v info1 %+v dead %d", b.Rewards, b.Done(0), b.Terminated[1], b.Infos[1], f.DeadRowSteps())
	}
	// Step 3: a2 leaves, the env ends and resets; dead rows end too.
	b, err = f.Step([]float32{0, 0, 2})
	if err != nil {
		t.Fatal(err)
	}
	for r := range 3 {
		if !b.Terminated[r] {
			t.Fatalf("step 3 row %d not terminated", r)
		}
		if b.ObsRow(r)[1] != 0 || b.ObsRow(r)[3+r] != 1 {
			t.Fatalf("step 3 row %d obs %v: want the reset obs", r, b.ObsRow(r))
		}
	}
	if f.DeadRowSteps() != 3 || b.Infos[2].Episode.Return != (1+2)+(0+2)+(2+2) {
		t.Fatalf("dead rows %d, a2 return %+v", f.DeadRowSteps(), b.Infos[2].Episode)
	}
}

// TestFlatAndTurnMatchParallel runs simple_spread three ways with the same
// actions: the Parallel env, a FlatVector of one env and a TurnEnv; the
// observations, per-agent rewards and team return must agree exactly.
func TestFlatAndTurnMatchParallel(t *testing.T) {
	const id = "mpe/simple_reference_v3"
	p, _ := MakeParallel(id)
	v, err := MakeVector(id, 2, Sync, WithEpisodeStatistics())
	if err != nil {
		t.Fatal(err)
	}
	te, err := Make(id)
	if err != nil {
		t.Fatal(err)
	}
	pObs, _, _ := p.Reset(VectorSeed(5, 0))
	b, _ := v.Reset(5)
	tObs, _, _ := te.Reset(VectorSeed(5, 0))
	if !slices.Equal(b.ObsRow(0), pObs["agent_0"]) || !slices.Equal(tObs, pObs["agent_0"]) {
		t.Fatal("reset observations differ")
	}
	team, turnRet := 0.0, 0.0
	for step := 0; step < 25; step++ {
		acts := map[string][]float32{"agent_0": {float32(step % 50)}, "agent_1": {float32((7 * step) % 50)}}
		o1, _, _, _, _, err := te.Step(acts["agent_0"])
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(o1, pObs["agent_1"]) {
			t.Fatalf("step %d: turn env shows %v, want agent_1's %v", step, o1, pObs["agent_1"])
		}
		_, r, _, trunc, _, err := te.Step(acts["agent_1"])
		if err != nil {
			t.Fatal(err)
		}
		turnRet += r
		b, err = v.Step([]float32{acts["agent_0"][0], acts["agent_1"][0]})
		if err != nil {
			t.Fatal(err)
		}
		obs, rew, _, ptrunc, _, err := p.Step(acts)
		if err != nil {
			t.Fatal(err)
		}
		pObs = obs
		team += rew["agent_0"] + rew["agent_1"]
		for j, a := range []string{"agent_0", "agent_1"} {
			if b.Rewards[j] != float32(rew[a]) {
				t.Fatalf("step %d row %d reward %v, want %v", step, j, b.Rewards[j], rew[a])
			}
			if !slices.Equal(b.NextObsRow(j), obs[a]) {
				t.Fatalf("step %d row %d next obs differs", step, j)
			}
		}
		if trunc != ptrunc["agent_0"] || b.Truncated[0] != ptrunc["agent_0"] {
			t.Fatalf("step %d: truncation %v %v %v", step, trunc, b.Truncated[0], ptrunc)
		}
	}
	if turnRet != team {
		t.Fatalf("turn env return %v, team return %v", turnRet, team)
	}
	if !b.Infos[0].HasEpisode || b.Infos[0].Episode.Length != 25 {
		t.Fatalf("episode stats %+v", b.Infos[0])
	}
}

// TestFlatStateRows checks the rows of a centralized critic: every row
// ends with the joint observation, which is the concatenation of the
// agents' own observations, before and after a step.
func TestFlatStateRows(t *testing.T) {
	v, err := MakeVector("mpe/simple_spread_v3?agent_id=true&state=true", 6, Sync)
	if err != nil {
		t.Fatal(err)
	}
	f := v.(*FlatVector)
	if f.LocalDim() != 18+3 || v.ObservationSpace().Dim() != 18+3+3*18 {
		t.Fatalf("local %d, row %d", f.LocalDim(), v.ObservationSpace().Dim())
	}
	check := func(b *Batch) {
		t.Helper()
		for env := range 2 {
			var joint []float32
			for j := range 3 {
				joint = append(joint, b.ObsRow(env*3 + j)[:18]...)
			}
			for j := range 3 {
				row := b.ObsRow(env*3 + j)
				if !slices.Equal(row[21:], joint) || row[18+j] != 1 {
					t.Fatalf("env %d row %d: state part is not the joint observation", env, j)
				}
			}
		}
	}
	b, err := v.Reset(2)
	if err != nil {
		t.Fatal(err)
	}
	check(b)
	if b, err = v.Step([]float32{1, 2, 3, 4, 0, 1}); err != nil {
		t.Fatal(err)
	}
	check(b)
}

// TestTurnEnvAgentsLeave steps the turn view of countdown, whose agents
// leave one by one: the turns skip agents that left, the reward of each
// world step is the sum over the agents that acted, and the episode ends
// (terminated) when the last agent leaves.
func TestTurnEnvAgentsLeave(t *testing.T) {
	te, err := NewTurnEnv(newCountdown(3), FlatOptions{AgentID: true})
	if err != nil {
		t.Fatal(err)
	}
	obs, _, err := te.Reset(0)
	if err != nil {
		t.Fatal(err)
	}
	var turns []string
	var rewards []float64
	for {
		turns = append(turns, te.Agent())
		if obs[3+slices.Index(te.Parallel().PossibleAgents(), te.Agent())] != 1 {
			t.Fatalf("turn of %s shows id %v", te.Agent(), obs[3:])
		}
		var r float64
		var term, trunc bool
		obs, r, term, trunc, _, err = te.Step([]float32{1})
		if err != nil {
			t.Fatal(err)
		}
		if te.Advanced() {
			rewards = append(rewards, r)
		}
		if term || trunc {
			if !term || trunc {
				t.Fatalf("end: terminated %v truncated %v", term, trunc)
			}
			break
		}
	}
	want := []string{"a0", "a1", "a2", "a1", "a2", "a2"}
	if !slices.Equal(turns, want) {
		t.Fatalf("turns %v, want %v", turns, want)
	}
	// Rewards are action 1 + k per agent that acted.
	if !slices.Equal(rewards, []float64{1 + 2 + 3, 2 + 3, 3}) {
		t.Fatalf("world-step rewards %v", rewards)
	}
	if _, _, _, _, _, err := te.Step([]float32{1}); !errors.Is(err, ErrNeedsReset) {
		t.Fatalf("step after the end: %v", err)
	}
	if _, _, err := te.Reset(NoSeed); err != nil {
		t.Fatal(err)
	}
	if _, _, _, _, _, err := te.Step([]float32{7}); !errors.Is(err, ErrInvalidAction) {
		t.Fatalf("invalid action: %v", err)
	}
}

// statedCountdown is countdown with a global state of its own, [t, 100 +
// t], which no observation holds.
type statedCountdown struct{ *countdown }

func (c statedCountdown) GlobalState(dst []float32) []float32 {
	return append(dst[:0], float32(c.t), 100+float32(c.t))
}
func (c statedCountdown) GlobalStateSpace() Space { return UniformBox(0, 200, 2) }

// TestFlatRowsUseGlobalState: with state=true the rows end in the env's
// global state (GlobalState) when it has one, the final rows in the
// state of the episode's last step, the TurnEnv's likewise; and MPE's
// global state is PettingZoo's state(), the agents' observations
// concatenated.
func TestFlatRowsUseGlobalState(t *testing.T) {
	pv, err := NewParallelVector(1, func(int) (Parallel, error) { return statedCountdown{newCountdown(2)}, nil })
	if err != nil {
		t.Fatal(err)
	}
	f, err := NewFlatVector(pv, FlatOptions{State: true})
	if err != nil {
		t.Fatal(err)
	}
	if l := f.RowLayout(); l.State != 2 || l.Width() != 5 || f.ObservationSpace().Dim() != 5 {
		t.Fatalf("layout %+v, rows of %d", l, f.ObservationSpace().Dim())
	}
	b, err := f.Reset(1)
	if err != nil {
		t.Fatal(err)
	}
	for r := range 2 {
		if got := b.ObsRow(r)[3:]; !slices.Equal(got, []float32{0, 100}) {
			t.Fatalf("reset row %d state %v", r, got)
		}
	}
	if b, err = f.Step([]float32{0, 0}); err != nil { // a0 leaves
		t.Fatal(err)
	}
	if got := b.FinalObs[3:5]; !slices.Equal(got, []float32{1, 101}) {
		t.Fatalf("a0's final row state %v", got)
	}
	if got := b.ObsRow(1)[3:]; !slices.Equal(got, []float32{1, 101}) {
		t.Fatalf("a1's row state %v", got)
	}
	if b, err = f.Step([]float32{0, 0}); err != nil { // a1 leaves: episode over, reset
		t.Fatal(err)
	}
	if got := b.FinalObs[5+3 : 5+5]; !slices.Equal(got, []float32{2, 102}) {
		t.Fatalf("a1's final row state %v, want the last step's", got)
	}
	if got := b.ObsRow(1)[3:]; !slices.Equal(got, []float32{0, 100}) {
		t.Fatalf("a1's row after the reset: state %v", got)
	}
	tv, err := NewTurnEnv(statedCountdown{newCountdown(2)}, FlatOptions{State: true})
	if err != nil {
		t.Fatal(err)
	}
	obs, _, err := tv.Reset(1)
	if err != nil || !slices.Equal(obs[3:], []float32{0, 100}) {
		t.Fatalf("turn env reset %v %v", obs, err)
	}

	p, err := MakeParallel("mpe/simple_tag_v3")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	g := p.(GlobalState)
	obsMap, _, err := p.Reset(3)
	if err != nil {
		t.Fatal(err)
	}
	for step := range 3 {
		var joint []float32
		for _, a := range p.PossibleAgents() {
			joint = append(joint, obsMap[a]...)
		}
		if st := g.GlobalState(nil); !slices.Equal(st, joint) || g.GlobalStateSpace().Dim() != len(joint) {
			t.Fatalf("step %d: MPE state %v, want the observations concatenated %v", step, st, joint)
		}
		acts := map[string][]float32{}
		for k, a := range p.Agents() {
			acts[a] = []float32{float32(k % 5)}
		}
		if obsMap, _, _, _, _, err = p.Step(acts); err != nil {
			t.Fatal(err)
		}
	}
}
