package envsvc

import (
	"errors"
	"maps"
	"math"
	"slices"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"herd/env"
	"herd/internal/pyproc"
	"herd/internal/rng"
	herdv1 "herd/proto/herd/v1"
)

// lineWalk is python/tests/pyparallel.py's LineWalk in Go: three agents
// walk on a line of integers to their own goals and leave when they reach
// them (terminated) or after maxCycles steps (truncated).
type lineWalk struct {
	possible        []string
	agents          []string
	pos, goal       map[string]int
	t, maxCycles    int
	seed, episode   int64
	obs             map[string][]float32
	rew             map[string]float64
	term, trunc     map[string]bool
	infos           map[string]env.Info
	obsSpace, actSp map[string]env.Space
}

func newLineWalk() *lineWalk {
	w := &lineWalk{possible: []string{"walker_0", "walker_1", "runner"}, maxCycles: 6,
		pos: map[string]int{}, goal: map[string]int{}, obsSpace: map[string]env.Space{}, actSp: map[string]env.Space{}}
	for _, a := range w.possible {
		d := 2
		if a == "runner" {
			d = 3
		}
		lo, hi := make([]float32, d), make([]float32, d)
		for i := range lo {
			lo[i], hi[i] = -20, 20
		}
		b, _ := env.NewBox(lo, hi)
		w.obsSpace[a], w.actSp[a] = b, env.Discrete{N: 3}
	}
	return w
}

func (w *lineWalk) PossibleAgents() []string { return w.possible }
func (w *lineWalk) Agents() []string         { return w.agents }
func (w *lineWalk) ObservationSpace(a string) (env.Space, error) {
	return w.obsSpace[a], nil
}
func (w *lineWalk) ActionSpace(a string) (env.Space, error) { return w.actSp[a], nil }
func (w *lineWalk) Close() error                            { return nil }

func (w *lineWalk) ob(a string) []float32 {
	o := []float32{float32(w.pos[a]), float32(w.goal[a])}
	if a == "runner" {
		o = append(o, float32(w.t))
	}
	return o
}

func (w *lineWalk) Reset(seed int64) (map[string][]float32, map[string]env.Info, error) {
	if seed >= 0 {
		w.seed, w.episode = seed, 0
	} else {
		w.episode++
	}
	k := int(w.seed%1000 + 7*w.episode)
	w.obs, w.infos = map[string][]float32{}, map[string]env.Info{}
	for i, a := range w.possible {
		w.pos[a], w.goal[a] = (k+3*i)%7-3, (5*k+i)%5-2
	}
	w.t = 0
	w.agents = slices.Clone(w.possible)
	for _, a := range w.agents {
		w.obs[a], w.infos[a] = w.ob(a), env.Info{}
	}
	return w.obs, w.infos, nil
}

func (w *lineWalk) Step(actions map[string][]float32) (map[string][]float32, map[string]float64, map[string]bool, map[string]bool, map[string]env.Info, error) {
	if len(w.agents) == 0 {
		return nil, nil, nil, nil, nil, env.ErrNeedsReset
	}
	if err := env.CheckParallelActions(w, actions); err != nil {
		return nil, nil, nil, nil, nil, err
	}
	w.t++
	w.obs, w.rew, w.term, w.trunc, w.infos = map[string][]float32{}, map[string]float64{}, map[string]bool{}, map[string]bool{}, map[string]env.Info{}
	var next []string
	for _, a := range w.agents {
		w.pos[a] += int(actions[a][0]) - 1
		w.rew[a] = -math.Abs(float64(w.pos[a] - w.goal[a]))
		w.term[a] = w.pos[a] == w.goal[a]
		w.trunc[a] = !w.term[a] && w.t >= w.maxCycles
		w.obs[a], w.infos[a] = w.ob(a), env.Info{}
		if !w.term[a] && !w.trunc[a] {
			next = append(next, a)
		}
	}
	w.agents = next
	return w.obs, w.rew, w.term, w.trunc, w.infos, nil
}

// TestPythonParallel steps a pure-Python PettingZoo-style Parallel env
// (python/tests/pyparallel.py), served by a real `python3 -m
// herd_env.serve` process that detects its Parallel API, beside a Go copy
// of its rules. As a Parallel every step's maps and agents agree; as rows
// (MakeVector: one session of 3 envs with autoreset, agents that leave
// early becoming dead rows) every batch is the same bits as a local
// FlatVector over the Go copy. The server refuses bad actions in-band
// (INVALID_ACTION) before stepping any env, and a single-agent open.
func TestPythonParallel(t *testing.T) {
	p := pyproc.Start(t, "herd_env.serve", "--env", "pyparallel:LineWalk")
	id := "grpc://" + p.Addr() + "/LineWalk?timeout=20s"
	if !envs().IsParallel(id) {
		t.Fatalf("IsParallel(%s) = false", id)
	}
	rp, err := envs().MakeParallel(id)
	if err != nil {
		t.Fatal(err)
	}
	defer rp.Close()
	lp := newLineWalk()
	if !slices.Equal(rp.PossibleAgents(), lp.PossibleAgents()) {
		t.Fatalf("agents %v", rp.PossibleAgents())
	}
	for _, a := range lp.possible {
		rs, _ := rp.ObservationSpace(a)
		if rs.String() != lp.obsSpace[a].String() {
			t.Fatalf("agent %s observation space %v, want %v", a, rs, lp.obsSpace[a])
		}
	}
	r := rng.New(9, "test/pyparallel", 0)
	left := 0 // agents that left before their episode ended
	for ep := range 12 {
		seed := int64(ep * 13)
		if ep%3 == 2 {
			seed = env.NoSeed
		}
		ro, _, err := rp.Reset(seed)
		if err != nil {
			t.Fatal(err)
		}
		lo, _, _ := lp.Reset(seed)
		sameObs(t, ep, -1, lo, ro)
		for k := 0; len(lp.Agents()) > 0; k++ {
			acts := map[string][]float32{}
			for _, a := range lp.Agents() {
				acts[a] = []float32{float32(r.IntN(3))}
			}
			ro, rr, rterm, rtrunc, _, err := rp.Step(acts)
			if err != nil {
				t.Fatal(err)
			}
			lo, lr, lterm, ltrunc, _, _ := lp.Step(acts)
			sameObs(t, ep, k, lo, ro)
			if !maps.Equal(lr, rr) || !maps.Equal(lterm, rterm) || !maps.Equal(ltrunc, rtrunc) || !slices.Equal(lp.Agents(), rp.Agents()) {
				t.Fatalf("episode %d step %d: go %v %v %v %v, python %v %v %v %v", ep, k, lr, lterm, ltrunc, lp.Agents(), rr, rterm, rtrunc, rp.Agents())
			}
			if len(lp.Agents()) > 0 && len(lp.Agents()) < len(acts) {
				left++
			}
		}
	}
	if left == 0 {
		t.Fatal("no agent left before its episode's end: the test misses agents leaving")
	}

	const rows = 9
	remote, err := envs().MakeVector(id+"&agent_id=true", rows, env.Sync, env.WithEpisodeStatistics())
	if err != nil {
		t.Fatal(err)
	}
	defer remote.Close()
	pv, err := env.NewParallelVector(rows/3, func(int) (env.Parallel, error) { return newLineWalk(), nil })
	if err != nil {
		t.Fatal(err)
	}
	local, err := env.NewFlatVector(pv, env.FlatOptions{AgentID: true, EpisodeStatistics: true})
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	lb, err := local.Reset(4)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := remote.Reset(4)
	if err != nil {
		t.Fatal(err)
	}
	compareBatch(t, "LineWalk", -1, lb, rb, false)
	act := make([]float32, rows)
	for step := range 60 {
		for i := range act {
			act[i] = float32(r.IntN(3))
		}
		if lb, err = local.Step(act); err != nil {
			t.Fatal(err)
		}
		if rb, err = remote.Step(act); err != nil {
			t.Fatal(err)
		}
		compareBatch(t, "LineWalk", step, lb, rb, true)
	}
	if local.DeadRowSteps() == 0 {
		t.Fatal("no dead rows: the vector test misses agents leaving")
	}

	s := rawSession(t, p.Addr())
	open := openMsg(1, "LineWalk", 2)
	open.GetOpen().Parallel = true
	if err := s.Send(open); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err != nil {
		t.Fatal(err)
	}
	ask := func(req *herdv1.EnvRequest) *herdv1.EnvResponse {
		t.Helper()
		if err := s.Send(req); err != nil {
			t.Fatal(err)
		}
		resp, err := s.Recv()
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	checkParallelRefusals(t, ask)

	s2 := rawSession(t, p.Addr())
	if err := s2.Send(openMsg(1, "LineWalk", 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Recv(); status.Code(err) != codes.InvalidArgument {
		t.Errorf("single-agent open of a multi-agent env: %v", err)
	}
	if _, err := envs().Make("grpc://" + p.Addr() + "/Other"); err == nil || !errors.Is(err, env.ErrUnknownID) {
		t.Errorf("unknown id: %v", err)
	}
}

// checkParallelRefusals asks a new two-env LineWalk session, over either
// transport, for what every server must refuse: a step before reset, five
// bad actions, a state request; a refused step must leave the env as it was.
func checkParallelRefusals(t *testing.T, ask func(*herdv1.EnvRequest) *herdv1.EnvResponse) {
	t.Helper()
	good := map[string]float32{"walker_0": 1, "walker_1": 1, "runner": 1}
	if e := ask(pstepMsg(good, good)).GetError(); e.GetReason() != "NEEDS_RESET" {
		t.Fatalf("step before reset: %v", e)
	}
	ask(resetReqMsg(1, 2))
	nan := float32(math.NaN())
	for name, req := range map[string]*herdv1.EnvRequest{
		"one map for two envs": pstepMsg(good),
		"unknown agent":        pstepMsg(good, map[string]float32{"walker_0": 1, "walker_1": 1, "runner": 1, "ghost": 0}),
		"missing agent":        pstepMsg(good, map[string]float32{"walker_0": 1, "runner": 1}),
		"NaN":                  pstepMsg(good, map[string]float32{"walker_0": nan, "walker_1": 1, "runner": 1}),
		"out of range":         pstepMsg(good, map[string]float32{"walker_0": 3, "walker_1": 1, "runner": 1}),
	} {
		if e := ask(req).GetError(); e.GetReason() != "INVALID_ACTION" || e.GetCode() != int32(codes.InvalidArgument) {
			t.Errorf("%s: answer %v, want INVALID_ACTION", name, e)
		}
	}
	b := ask(pstepMsg(good, good)).GetParallelBatch()
	if got := b.GetEnvs()[0].GetObs()["runner"].GetValues(); len(got) != 3 || got[2] != 1 {
		t.Fatalf("runner after one step: %v; a refused step moved the env", got)
	}
	if st := ask(&herdv1.EnvRequest{Msg: &herdv1.EnvRequest_State{State: &herdv1.StateRequest{}}}).GetError(); st.GetReason() != "UNSUPPORTED" {
		t.Errorf("state request: %v", st)
	}
}

func pstepMsg(envs ...map[string]float32) *herdv1.EnvRequest {
	req := &herdv1.ParallelStepRequest{}
	for _, m := range envs {
		aa := &herdv1.AgentActions{Actions: map[string]*herdv1.Floats{}}
		for a, v := range m {
			aa.Actions[a] = &herdv1.Floats{Values: []float32{v}}
		}
		req.Envs = append(req.Envs, aa)
	}
	return &herdv1.EnvRequest{Msg: &herdv1.EnvRequest_ParallelStep{ParallelStep: req}}
}
