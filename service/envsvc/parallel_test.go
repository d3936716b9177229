package envsvc

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"herd/env"
	"herd/internal/rng"
	herdv1 "herd/proto/herd/v1"
)

// TestRemoteSimpleSpreadSameBits: simple_spread served by herd serve env's
// server steps exactly as the local one. As rows (MakeVector, one session
// of 4 envs with autoreset, agent ids and the joint state appended) every
// batch is the same bits, over 8 episodes of 25 steps, final observations
// and episode statistics included; as a Parallel (MakeParallel), every map
// of every step is equal, and a step after the episode's end is
// ErrNeedsReset from both.
func TestRemoteSimpleSpreadSameBits(t *testing.T) {
	addr, _ := startServer(t, nil, 0)
	const id = "mpe/simple_spread_v3?agent_id=true&state=true"
	remoteID := "grpc://" + addr + "/" + id
	if !envs().IsParallel(remoteID) {
		t.Fatalf("IsParallel(%s) = false", remoteID)
	}
	const rows = 12 // 4 envs × 3 agents
	local, err := envs().MakeVector(id, rows, env.Sync, env.WithEpisodeStatistics())
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	remote, err := envs().MakeVector(remoteID, rows, env.Sync, env.WithEpisodeStatistics())
	if err != nil {
		t.Fatal(err)
	}
	defer remote.Close()
	if fmt.Sprint(local.ObservationSpace(), local.ActionSpace()) != fmt.Sprint(remote.ObservationSpace(), remote.ActionSpace()) {
		t.Fatalf("spaces: local %v %v, remote %v %v", local.ObservationSpace(), local.ActionSpace(), remote.ObservationSpace(), remote.ActionSpace())
	}
	lb, err := local.Reset(11)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := remote.Reset(11)
	if err != nil {
		t.Fatal(err)
	}
	compareBatch(t, id, -1, lb, rb, false)
	r := rng.New(3, "test/remote-spread", 0)
	act := make([]float32, rows)
	ended := 0
	for step := 0; step < 200; step++ {
		for i := range act {
			act[i] = float32(r.IntN(5))
		}
		if lb, err = local.Step(act); err != nil {
			t.Fatal(err)
		}
		if rb, err = remote.Step(act); err != nil {
			t.Fatal(err)
		}
		compareBatch(t, id, step, lb, rb, true)
		for i := range rows {
			if lb.Done(i) {
				ended++
			}
		}
	}
	if ended != 8*rows {
		t.Fatalf("%d row episodes ended in 200 steps, want %d", ended, 8*rows)
	}

	lp, err := envs().MakeParallel("mpe/simple_spread_v3")
	if err != nil {
		t.Fatal(err)
	}
	defer lp.Close()
	rp, err := envs().MakeParallel("grpc://" + addr + "/mpe/simple_spread_v3")
	if err != nil {
		t.Fatal(err)
	}
	defer rp.Close()
	if !slices.Equal(lp.PossibleAgents(), rp.PossibleAgents()) {
		t.Fatalf("agents: local %v remote %v", lp.PossibleAgents(), rp.PossibleAgents())
	}
	for ep := range 3 {
		lo, _, err := lp.Reset(int64(20 + ep))
		if err != nil {
			t.Fatal(err)
		}
		ro, _, err := rp.Reset(int64(20 + ep))
		if err != nil {
			t.Fatal(err)
		}
		sameObs(t, ep, -1, lo, ro)
		for k := 0; len(lp.Agents()) > 0; k++ {
			acts := map[string][]float32{}
			for _, a := range lp.Agents() {
				acts[a] = []float32{float32(r.IntN(5))}
			}
			lo, lr, lterm, ltrunc, _, err := lp.Step(acts)
			if err != nil {
				t.Fatal(err)
			}
			ro, rr, rterm, rtrunc, _, err := rp.Step(acts)
			if err != nil {
				t.Fatal(err)
			}
			sameObs(t, ep, k, lo, ro)
			if !maps.Equal(lr, rr) || !maps.Equal(lterm, rterm) || !maps.Equal(ltrunc, rtrunc) || !slices.Equal(lp.Agents(), rp.Agents()) {
				t.Fatalf("episode %d step %d: local %v %v %v %v, remote %v %v %v %v", ep, k, lr, lterm, ltrunc, lp.Agents(), rr, rterm, rtrunc, rp.Agents())
			}
		}
		acts := map[string][]float32{"agent_0": {0}}
		_, _, _, _, _, lerr := lp.Step(acts)
		_, _, _, _, _, rerr := rp.Step(acts)
		if !errors.Is(lerr, env.ErrNeedsReset) || !errors.Is(rerr, env.ErrNeedsReset) {
			t.Fatalf("step after the end: local %v, remote %v; want ErrNeedsReset", lerr, rerr)
		}
	}
}

func sameObs(t *testing.T, ep, step int, a, b map[string][]float32) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("episode %d step %d: observations of %d agents local, %d remote", ep, step, len(a), len(b))
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			t.Fatalf("episode %d step %d agent %s: local %v remote %v", ep, step, k, v, b[k])
		}
	}
}

// TestRemoteParallelBadInput: bad actions are refused with
// ErrInvalidAction by the client before they travel, and by the server
// in-band (INVALID_ACTION, the session going on, no env stepped) when a
// client sends them anyway; a wrong kind of request ends the stream;
// opening a single-agent id as multi-agent is NOT_FOUND; row options on a
// single-agent remote id are an error; Make of a remote multi-agent id is
// a TurnEnv.
func TestRemoteParallelBadInput(t *testing.T) {
	addr, _ := startServer(t, nil, 0)
	rp, err := envs().MakeParallel("grpc://" + addr + "/mpe/simple_spread_v3")
	if err != nil {
		t.Fatal(err)
	}
	defer rp.Close()
	if _, _, _, _, _, err := rp.Step(map[string][]float32{}); !errors.Is(err, env.ErrNeedsReset) {
		t.Fatalf("step before reset: %v", err)
	}
	if _, _, err := rp.Reset(1); err != nil {
		t.Fatal(err)
	}
	nan := float32(math.NaN())
	for name, acts := range map[string]map[string][]float32{
		"unknown agent": {"agent_0": {0}, "agent_1": {0}, "agent_2": {0}, "agent_9": {0}},
		"missing agent": {"agent_0": {0}, "agent_1": {0}},
		"wrong length":  {"agent_0": {0, 1}, "agent_1": {0}, "agent_2": {0}},
		"NaN":           {"agent_0": {nan}, "agent_1": {0}, "agent_2": {0}},
		"out of range":  {"agent_0": {5}, "agent_1": {0}, "agent_2": {0}},
	} {
		if _, _, _, _, _, err := rp.Step(acts); !errors.Is(err, env.ErrInvalidAction) {
			t.Errorf("%s: %v, want ErrInvalidAction", name, err)
		}
	}
	if _, err := rp.ObservationSpace("agent_9"); !errors.Is(err, env.ErrInvalidOption) {
		t.Errorf("space of an unknown agent: %v", err)
	}

	// The server checks too, for clients that do not.
	s := rawSession(t, addr)
	open := openMsg(1, "mpe/simple_spread_v3", 2)
	open.GetOpen().Parallel = true
	if err := s.Send(open); err != nil {
		t.Fatal(err)
	}
	resp, err := s.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if got := len(resp.GetOpen().GetParallel().GetAgents()); got != 3 {
		t.Fatalf("open answer has %d agents", got)
	}
	pstep := func(envs ...map[string][]float32) *herdv1.EnvRequest {
		req := &herdv1.ParallelStepRequest{}
		for _, m := range envs {
			aa := &herdv1.AgentActions{Actions: map[string]*herdv1.Floats{}}
			for a, v := range m {
				aa.Actions[a] = &herdv1.Floats{Values: v}
			}
			req.Envs = append(req.Envs, aa)
		}
		return &herdv1.EnvRequest{Msg: &herdv1.EnvRequest_ParallelStep{ParallelStep: req}}
	}
	good := map[string][]float32{"agent_0": {1}, "agent_1": {2}, "agent_2": {3}}
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
	if e := ask(pstep(good, good)).GetError(); e.GetReason() != "NEEDS_RESET" {
		t.Fatalf("step before reset: %v", e)
	}
	ask(resetReqMsg(5, 6))
	for name, req := range map[string]*herdv1.EnvRequest{
		"one map for two envs": pstep(good),
		"unknown agent":        pstep(good, map[string][]float32{"agent_0": {1}, "agent_1": {2}, "agent_2": {3}, "x": {0}}),
		"missing agent":        pstep(good, map[string][]float32{"agent_0": {1}, "agent_1": {2}}),
		"NaN":                  pstep(good, map[string][]float32{"agent_0": {nan}, "agent_1": {2}, "agent_2": {3}}),
		"wrong length":         pstep(good, map[string][]float32{"agent_0": {}, "agent_1": {2}, "agent_2": {3}}),
	} {
		if e := ask(req).GetError(); e.GetReason() != "INVALID_ACTION" || e.GetCode() != int32(codes.InvalidArgument) {
			t.Errorf("%s: answer %v, want INVALID_ACTION", name, e)
		}
	}
	// No env stepped: from the same seeds, a fresh local pair agrees with
	// one good step.
	b := ask(pstep(good, good)).GetParallelBatch()
	lp, err := envs().MakeParallel("mpe/simple_spread_v3")
	if err != nil {
		t.Fatal(err)
	}
	defer lp.Close()
	lp.Reset(6)
	lo, lr, _, _, _, err := lp.Step(good)
	if err != nil {
		t.Fatal(err)
	}
	for a, o := range lo {
		if !slices.Equal(o, b.GetEnvs()[1].GetObs()[a].GetValues()) || lr[a] != b.GetEnvs()[1].GetTransitions()[a].GetReward() {
			t.Fatalf("agent %s after refused steps: remote %v, local %v", a, b.GetEnvs()[1].GetObs()[a], o)
		}
	}
	if err := s.Send(stepMsg([]float32{1})); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("single-agent step in a multi-agent session: %v", err)
	}

	for name, mk := range map[string]func() *herdv1.EnvRequest{
		"single-agent id": func() *herdv1.EnvRequest {
			m := openMsg(1, "CartPole-v1", 1)
			m.GetOpen().Parallel = true
			return m
		},
		"max_episode_steps": func() *herdv1.EnvRequest {
			m := openMsg(1, "mpe/simple_spread_v3", 1)
			m.GetOpen().Parallel, m.GetOpen().MaxEpisodeSteps = true, 10
			return m
		},
	} {
		s := rawSession(t, addr)
		if err := s.Send(mk()); err != nil {
			t.Fatal(err)
		}
		want := codes.InvalidArgument
		if name == "single-agent id" {
			want = codes.NotFound
		}
		if _, err := s.Recv(); status.Code(err) != want {
			t.Errorf("%s: %v, want %v", name, err, want)
		}
	}

	if envs().IsParallel("grpc://" + addr + "/CartPole-v1") {
		t.Error("IsParallel of a remote CartPole")
	}
	if _, err := envs().Make("grpc://" + addr + "/CartPole-v1?agent_id=true"); !errors.Is(err, env.ErrInvalidOption) {
		t.Errorf("agent_id on a single-agent remote id: %v", err)
	}
	if _, err := envs().MakeVector("grpc://"+addr+"/mpe/simple_spread_v3", 4, env.Sync); !errors.Is(err, env.ErrInvalidOption) {
		t.Errorf("4 rows of a 3-agent env: %v", err)
	}
	if _, err := envs().MakeVector("grpc://"+addr+"/mpe/simple_spread_v3?inflight=2", 6, env.Sync); !errors.Is(err, env.ErrInvalidOption) {
		t.Errorf("inflight on a multi-agent id: %v", err)
	}
	e, err := envs().Make("grpc://" + addr + "/mpe/simple_spread_v3?agent_id=true")
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if _, ok := e.(*env.TurnEnv); !ok {
		t.Fatalf("Make of a remote multi-agent id gave %T", e)
	}
	if d := e.ObservationSpace().Dim(); d != 18+3 {
		t.Fatalf("turn view rows of %d values, want 21", d)
	}
}

func resetReqMsg(seeds ...int64) *herdv1.EnvRequest {
	return &herdv1.EnvRequest{Msg: &herdv1.EnvRequest_Reset_{Reset_: &herdv1.ResetRequest{Seeds: seeds}}}
}
