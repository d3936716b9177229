package envsvc

import (
	"fmt"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"herd/env"
	"herd/env/remote"
	herdv1 "herd/proto/herd/v1"
)

// openParallel checks a multi-agent session's first message (parallel =
// true) and makes its envs with Config.ParallelEnvs or env.MakeParallel.
func (s *Server) openParallel(first *herdv1.EnvRequest) (*parallelSession, error) {
	n, err := s.checkOpen(first)
	if err != nil {
		return nil, err
	}
	open := first.GetOpen()
	id := open.GetEnvId()
	if remote.IsID(id) {
		return nil, status.Errorf(codes.InvalidArgument, "env id %q: a server does not open remote envs", id)
	}
	if open.GetMaxEpisodeSteps() != 0 {
		return nil, status.Errorf(codes.InvalidArgument, "max_episode_steps %d: a multi-agent env keeps its own limit (e.g. MPE's max_cycles); send 0", open.GetMaxEpisodeSteps())
	}
	sess := &parallelSession{autoreset: open.GetAutoreset(), metrics: s.metrics}
	mk, own := s.parallel[id]
	for range n {
		var p env.Parallel
		if own {
			p, err = mk()
		} else {
			p, err = env.MakeParallel(id)
		}
		if err != nil {
			sess.close()
			if own || env.IsParallel(id) {
				return nil, status.Error(codes.InvalidArgument, err.Error())
			}
			return nil, status.Error(codes.NotFound, err.Error())
		}
		sess.envs = append(sess.envs, p)
	}
	sess.possible = slices.Clone(sess.envs[0].PossibleAgents())
	for _, a := range sess.possible {
		as, err := sess.envs[0].ActionSpace(a)
		if err != nil {
			sess.close()
			return nil, status.Error(codes.Internal, err.Error())
		}
		sess.acts = append(sess.acts, as)
	}
	if g, ok := sess.envs[0].(env.GlobalState); ok && open.GetGlobalState() {
		sess.state = g.GlobalStateSpace()
	}
	sess.running = make([]bool, n)
	sess.actions = make([]map[string][]float32, n)
	sess.trans = make([]map[string]*herdv1.AgentTransition, n)
	sess.infoMsgs = make([][2]map[string]*herdv1.AgentInfo, n)
	for i := range sess.actions {
		sess.actions[i] = map[string][]float32{}
		sess.trans[i] = map[string]*herdv1.AgentTransition{}
		sess.infoMsgs[i] = [2]map[string]*herdv1.AgentInfo{{}, {}}
		sess.batch.Envs = append(sess.batch.Envs, &herdv1.ParallelEnvBatch{Obs: map[string]*herdv1.Floats{},
			Transitions: map[string]*herdv1.AgentTransition{}, FinalObs: map[string]*herdv1.Floats{},
			Infos: map[string]*herdv1.AgentInfo{}, ResetInfos: map[string]*herdv1.AgentInfo{}})
	}
	s.metrics.open()
	return sess, nil
}

// parallelSession is one stream's multi-agent envs.
type parallelSession struct {
	envs      []env.Parallel
	possible  []string
	acts      []env.Space // action space per possible agent
	autoreset bool
	running   []bool // reset, and its episode not over
	actions   []map[string][]float32
	metrics   *serverMetrics
	// state is the envs' global state space when the open asked for it
	// (global_state) and they have one; nil otherwise.
	state env.Space
	// batch answers every Reset and Step, its messages reused; trans
	// holds each env's AgentTransition messages, kept while Transitions
	// is cleared, and infoMsgs its AgentInfo messages (for Infos, for
	// ResetInfos).
	batch    herdv1.ParallelBatch
	trans    []map[string]*herdv1.AgentTransition
	infoMsgs [][2]map[string]*herdv1.AgentInfo
}

func (s *parallelSession) close() {
	for _, e := range s.envs {
		e.Close()
	}
}

func (s *parallelSession) openResponse() (*herdv1.EnvResponse, error) {
	sp := &herdv1.ParallelSpaces{}
	e := s.envs[0]
	for _, a := range s.possible {
		os, err := e.ObservationSpace(a)
		if err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		as, err := e.ActionSpace(a)
		if err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		po, err := remote.SpaceToProto(os)
		if err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		pa, err := remote.SpaceToProto(as)
		if err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		sp.Agents = append(sp.Agents, &herdv1.AgentSpaces{Agent: a, ObservationSpace: po, ActionSpace: pa})
	}
	if s.state != nil {
		if _, ok := s.state.(env.Box); !ok {
			return nil, status.Errorf(codes.Internal, "global state space %v is not a Box", s.state)
		}
		ps, err := remote.SpaceToProto(s.state)
		if err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		sp.StateSpace = ps
	}
	return &herdv1.EnvResponse{Msg: &herdv1.EnvResponse_Open{Open: &herdv1.OpenResponse{
		NumEnvs: uint32(len(s.envs)), Parallel: sp,
	}}}, nil
}

// handle answers one request; see session.handle.
func (s *parallelSession) handle(req *herdv1.EnvRequest) (*herdv1.EnvResponse, error) {
	switch m := req.GetMsg().(type) {
	case *herdv1.EnvRequest_Reset_:
		return s.reset(m.Reset_.GetSeeds())
	case *herdv1.EnvRequest_ParallelStep:
		return s.step(m.ParallelStep.GetEnvs()), nil
	case *herdv1.EnvRequest_Step:
		return nil, status.Error(codes.InvalidArgument, "a single-agent step in a multi-agent session (send parallel_step)")
	case *herdv1.EnvRequest_State:
		return &herdv1.EnvResponse{Error: &herdv1.Status{Code: int32(codes.Unimplemented), Reason: "UNSUPPORTED", Message: "multi-agent envs have no state access"}}, nil
	case *herdv1.EnvRequest_Open:
		return nil, status.Error(codes.InvalidArgument, "open sent twice in one session")
	}
	return nil, status.Error(codes.InvalidArgument, "empty request")
}

// floatsTo copies obs into the wire map dst, reusing its messages: the
// env owns its maps' slices until its next call, and an autoreset
// overwrites them within the step. The answer is sent before the session
// reads its next request, so its messages are reused by the next one.
func floatsTo(dst map[string]*herdv1.Floats, obs map[string][]float32) {
	for a := range dst {
		if _, ok := obs[a]; !ok {
			delete(dst, a)
		}
	}
	for a, o := range obs {
		f := dst[a]
		if f == nil {
			f = &herdv1.Floats{}
			dst[a] = f
		}
		f.Values = append(f.Values[:0], o...)
	}
}

// envBatch returns env i's part of the session's reused answer, cleared.
func (s *parallelSession) envBatch(i int) *herdv1.ParallelEnvBatch {
	eb := s.batch.Envs[i]
	eb.Agents = eb.Agents[:0]
	eb.Done = false
	clear(eb.Transitions)
	floatsTo(eb.FinalObs, nil)
	clear(eb.Infos)
	clear(eb.ResetInfos)
	eb.State, eb.FinalState = eb.State[:0], eb.FinalState[:0]
	return eb
}

// putInfo puts agent a's info into dst (Infos or ResetInfos of env i,
// which = 0 or 1) when it holds something herd reads, reusing the
// session's messages. A mask that does not fit the agent's action space
// is the env's error.
func (s *parallelSession) putInfo(i, which int, dst map[string]*herdv1.AgentInfo, a string, in env.Info) error {
	if in.ActionMask == nil {
		return nil
	}
	j := slices.Index(s.possible, a)
	if j < 0 {
		return fmt.Errorf("env %d: info of unknown agent %q", i, a)
	}
	if d, ok := s.acts[j].(env.Discrete); !ok || len(in.ActionMask) != d.N {
		return fmt.Errorf("env %d: agent %s: action mask of %d values for action space %v", i, a, len(in.ActionMask), s.acts[j])
	}
	m := s.infoMsgs[i][which][a]
	if m == nil {
		m = &herdv1.AgentInfo{}
		s.infoMsgs[i][which][a] = m
	}
	m.ActionMask = append(m.ActionMask[:0], in.ActionMask...)
	dst[a] = m
	return nil
}

// globalState appends env e's global state to dst when the session sends
// one.
func (s *parallelSession) globalState(e env.Parallel, dst []float32) []float32 {
	if s.state == nil {
		return dst
	}
	return e.(env.GlobalState).GlobalState(dst)
}

func (s *parallelSession) reset(seeds []int64) (*herdv1.EnvResponse, error) {
	if len(seeds) != 0 && len(seeds) != len(s.envs) {
		return nil, status.Errorf(codes.InvalidArgument, "reset with %d seeds for %d envs", len(seeds), len(s.envs))
	}
	b := &s.batch
	for i, e := range s.envs {
		seed := env.NoSeed
		if len(seeds) > 0 && seeds[i] >= 0 {
			seed = seeds[i]
		}
		s.running[i] = false
		obs, infos, err := e.Reset(seed)
		if err != nil {
			return inBand(fmt.Errorf("env %d: %w", i, err)), nil
		}
		s.running[i] = len(e.Agents()) > 0
		eb := s.envBatch(i)
		floatsTo(eb.Obs, obs)
		eb.Agents = append(eb.Agents, e.Agents()...)
		for _, a := range eb.Agents {
			if err := s.putInfo(i, 0, eb.Infos, a, infos[a]); err != nil {
				s.running[i] = false
				return inBand(err), nil
			}
		}
		eb.State = s.globalState(e, eb.State)
	}
	return &herdv1.EnvResponse{Msg: &herdv1.EnvResponse_ParallelBatch{ParallelBatch: b}}, nil
}

// step checks every env's actions before stepping any, so an invalid one
// (an unknown or missing agent, a wrong length, a NaN, a value outside a
// discrete space) leaves all envs untouched.
func (s *parallelSession) step(envs []*herdv1.AgentActions) *herdv1.EnvResponse {
	n := len(s.envs)
	if len(envs) != n {
		return inBand(fmt.Errorf("%w: %d envs want %d action maps, got %d", env.ErrInvalidAction, n, n, len(envs)))
	}
	for i, e := range s.envs {
		if !s.running[i] {
			return inBand(fmt.Errorf("%w: env %d: step before reset or after the episode ended", env.ErrNeedsReset, i))
		}
		m := s.actions[i]
		clear(m)
		for a, f := range envs[i].GetActions() {
			m[a] = f.GetValues()
		}
		if err := env.CheckParallelActions(e, m); err != nil {
			return inBand(fmt.Errorf("env %d: %w", i, err))
		}
	}
	var t0 time.Time
	if s.metrics != nil {
		t0 = time.Now()
	}
	b := &s.batch
	ended := 0
	for i, e := range s.envs {
		obs, rew, term, trunc, infos, err := e.Step(s.actions[i])
		if err != nil {
			return inBand(fmt.Errorf("env %d: %w", i, err))
		}
		eb := s.envBatch(i)
		for a := range s.actions[i] {
			if err := s.putInfo(i, 0, eb.Infos, a, infos[a]); err != nil {
				return inBand(err)
			}
			tr := s.trans[i][a]
			if tr == nil {
				tr = &herdv1.AgentTransition{}
				s.trans[i][a] = tr
			}
			tr.Reward, tr.Terminated, tr.Truncated = rew[a], term[a], trunc[a]
			eb.Transitions[a] = tr
		}
		done := len(e.Agents()) == 0
		if done {
			ended++
			s.running[i] = false
		}
		if done && s.autoreset {
			eb.Done = true
			floatsTo(eb.FinalObs, obs)
			eb.FinalState = s.globalState(e, eb.FinalState)
			if obs, infos, err = e.Reset(env.NoSeed); err != nil {
				return inBand(fmt.Errorf("env %d: autoreset: %w", i, err))
			}
			s.running[i] = len(e.Agents()) > 0
			for _, a := range e.Agents() {
				if err := s.putInfo(i, 1, eb.ResetInfos, a, infos[a]); err != nil {
					s.running[i] = false
					return inBand(err)
				}
			}
		}
		floatsTo(eb.Obs, obs)
		eb.Agents = append(eb.Agents, e.Agents()...)
		eb.State = s.globalState(e, eb.State)
	}
	s.metrics.step(n, ended, t0)
	return &herdv1.EnvResponse{Msg: &herdv1.EnvResponse_ParallelBatch{ParallelBatch: b}}
}
