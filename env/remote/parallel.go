package remote

import (
	"context"
	"fmt"
	"herd/env"
	"slices"

	herdv1 "herd/proto/herd/v1"
	"herd/service"
)

// Remote multi-agent envs. A remote id (grpc://HOST:PORT/ENV_ID or
// grpcs://…) names a multi-agent env when the server lists ENV_ID among
// its parallel_env_ids (Describe): herd serve env lists ParallelIDs, and
// python3 -m herd_env.serve lists its env when the object it serves has
// PettingZoo's Parallel API. IsParallel asks the server, so every place that
// takes a multi-agent id (MakeParallel, Make's TurnEnv, MakeVector's
// FlatVector, the executors' row handling) takes such a remote id as well.
//
// The id's agent_id=true, action_mask=true and state=true are the row
// options of a local multi-agent id (FlatOptions), applied on this side;
// env keywords are not sent (the server builds the env with its own
// settings). The server sends each agent's action mask (AgentInfo, from
// PettingZoo's info["action_mask"]) with its observation, and, when the
// session asks for it (state=true in a vector's id; always for
// MakeParallel), the env's own global state (PettingZoo's state() and
// state_space): MakeParallel's env is then a GlobalState. A server or an env
// without one leaves the state to this side (the agents' observations
// concatenated). Over shm:// a
// multi-agent session's messages are framed on the socket (no shared
// segment; herd serve env and python/herd_env alike), and inflight does not apply
// to them: MakeVector puts all its envs in one session, so one message
// carries every env's per-agent actions and one message answers.

// isParallel asks the server of the remote id whether it serves the
// env as a multi-agent env; the error says why it could not tell (a
// malformed id, a server that cannot be reached).
func isParallel(id string) (bool, error) {
	t, err := parseRemote(id)
	if err != nil {
		return false, err
	}
	if t.shm {
		// The shm socket has no Describe: open a multi-agent session of
		// one env, which a server opens only for a multi-agent id.
		p, err := openParallelSession(t, 1, env.Options{}, false, false)
		if err != nil {
			return false, err // unreachable, or a server that refuses a multi-agent session of the id
		}
		p.Close()
		return true, nil
	}
	d, err := describeRemote(t)
	if err != nil {
		return false, err
	}
	return slices.Contains(d.GetParallelEnvIds(), t.envID), nil
}

func describeRemote(t remoteTarget) (*herdv1.DescribeResponse, error) {
	conn, err := dialConn(t)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), t.timeout)
	defer cancel()
	return herdv1.NewEnvServiceClient(conn).Describe(ctx, &herdv1.DescribeRequest{})
}

// parallelSession is a session opened with parallel = true: n multi-agent
// envs on the server.
type parallelSession struct {
	*session
	possible  []string
	obs, act  []env.Space // per possible agent
	autoreset bool
	// state is the env's global state space when the session asked for
	// it and the server sends it; nil otherwise.
	state env.Space
	// resetInfos are env i's infos of its last autoreset (ObsInfos).
	resetInfos []map[string]env.Info
	req        herdv1.EnvRequest
	msg        herdv1.EnvRequest_ParallelStep
	body       herdv1.ParallelStepRequest
}

// openParallelSession opens n envs; globalState asks the server for the
// env's own global state in every answer.
func openParallelSession(t remoteTarget, n int, o env.Options, autoreset, globalState bool) (*parallelSession, error) {
	if len(o.Kwargs) > 0 {
		return nil, fmt.Errorf("%w: remote env %s: keyword arguments are not supported remotely", env.ErrInvalidOption, t.envID)
	}
	if t.inflight != 1 {
		return nil, fmt.Errorf("%w: remote env %s: inflight does not apply to multi-agent envs (one session carries every env)", env.ErrInvalidOption, t.envID)
	}
	if n <= 0 {
		return nil, fmt.Errorf("%w: %d multi-agent envs, want > 0", env.ErrInvalidOption, n)
	}
	s := &session{target: t, n: n}
	// Over shm:// the messages are framed on the socket, with no segment
	// (no attach): the per-agent batches change shape as agents leave.
	if err := s.dial(); err != nil {
		return nil, err
	}
	p := &parallelSession{session: s, autoreset: autoreset, resetInfos: make([]map[string]env.Info, n)}
	for i := range p.resetInfos {
		p.resetInfos[i] = map[string]env.Info{}
	}
	p.msg.ParallelStep = &p.body
	p.req.Msg = &p.msg
	fail := func(err error) (*parallelSession, error) {
		s.Close()
		return nil, err
	}
	open, err := s.open(&herdv1.OpenRequest{
		ProtocolVersion: service.ProtocolVersion, EnvId: t.envID, NumEnvs: uint32(n),
		Autoreset: autoreset, Parallel: true, GlobalState: globalState,
	})
	if err != nil {
		return nil, err
	}
	if open.GetParallel() == nil {
		return fail(s.protocolErr("the server opened a single-agent session (it predates multi-agent envs)"))
	}
	if open.GetNumEnvs() != uint32(n) {
		return fail(s.protocolErr(fmt.Sprintf("server opened %d envs, asked for %d", open.GetNumEnvs(), n)))
	}
	for _, as := range open.GetParallel().GetAgents() {
		name := as.GetAgent()
		if name == "" || slices.Contains(p.possible, name) {
			return fail(s.protocolErr(fmt.Sprintf("agent name %q empty or repeated", name)))
		}
		os, err := SpaceFromProto(as.GetObservationSpace())
		if err != nil {
			return fail(fmt.Errorf("agent %s: %w", name, err))
		}
		ac, err := SpaceFromProto(as.GetActionSpace())
		if err != nil {
			return fail(fmt.Errorf("agent %s: %w", name, err))
		}
		p.possible = append(p.possible, name)
		p.obs, p.act = append(p.obs, os), append(p.act, ac)
	}
	if len(p.possible) == 0 {
		return fail(s.protocolErr("multi-agent env with no agents"))
	}
	if ss := open.GetParallel().GetStateSpace(); ss != nil {
		if !globalState {
			return fail(s.protocolErr("the server sends a global state space the session did not ask for"))
		}
		sp, err := SpaceFromProto(ss)
		if err != nil {
			return fail(fmt.Errorf("global state: %w", err))
		}
		if _, ok := sp.(env.Box); !ok {
			return fail(s.protocolErr(fmt.Sprintf("global state space %v is not a Box", sp)))
		}
		p.state = sp
	}
	return p, nil
}

func (p *parallelSession) agentIndex(a string) int { return slices.Index(p.possible, a) }

func (p *parallelSession) actionSpace(a string) (env.Space, error) {
	j := p.agentIndex(a)
	if j < 0 {
		return nil, fmt.Errorf("%w: no agent %q (agents %v)", env.ErrInvalidOption, a, p.possible)
	}
	return p.act[j], nil
}

// reset resets every env (seeds[i] < 0: NoSeed) into steps.
func (p *parallelSession) reset(seeds []int64, steps []env.ParallelStep) error {
	resp, err := p.call(resetReq(seeds))
	if err != nil {
		return err
	}
	return p.decode(resp, nil, steps)
}

// step sends one action map per env (already checked) and decodes the
// answer into steps.
func (p *parallelSession) step(actions []map[string][]float32, steps []env.ParallelStep) error {
	body := &p.body
	if cap(body.Envs) < len(actions) {
		body.Envs = make([]*herdv1.AgentActions, len(actions))
		for i := range body.Envs {
			body.Envs[i] = &herdv1.AgentActions{Actions: map[string]*herdv1.Floats{}}
		}
	}
	body.Envs = body.Envs[:len(actions)]
	for i, m := range actions {
		am := body.Envs[i].Actions
		clear(am)
		for a, act := range m {
			am[a] = &herdv1.Floats{Values: act}
		}
	}
	resp, err := p.call(&p.req)
	for _, e := range body.Envs {
		clear(e.Actions) // the caller owns the action slices
	}
	if err != nil {
		return err
	}
	return p.decode(resp, actions, steps)
}

// decode checks a ParallelBatch (the answer to a reset when acted is nil,
// else to a step with those actions) and copies it into steps.
func (p *parallelSession) decode(resp *herdv1.EnvResponse, acted []map[string][]float32, steps []env.ParallelStep) error {
	b := resp.GetParallelBatch()
	if b == nil {
		return p.protocolErr("answer has no parallel batch")
	}
	if len(b.GetEnvs()) != p.n {
		return p.protocolErr(fmt.Sprintf("parallel batch for %d envs, want %d", len(b.GetEnvs()), p.n))
	}
	obsOK := func(m map[string]*herdv1.Floats) error {
		for a, o := range m {
			j := p.agentIndex(a)
			if j < 0 {
				return fmt.Errorf("observation of unknown agent %q", a)
			}
			if len(o.GetValues()) != p.obs[j].Dim() {
				return fmt.Errorf("agent %s observation has %d values, its space %d", a, len(o.GetValues()), p.obs[j].Dim())
			}
		}
		return nil
	}
	stateDim := 0
	if p.state != nil {
		stateDim = p.state.Dim()
	}
	for i, e := range b.GetEnvs() {
		bad := func(msg string) error { return p.protocolErr(fmt.Sprintf("env %d: %s", i, msg)) }
		if err := obsOK(e.GetObs()); err != nil {
			return bad(err.Error())
		}
		if err := obsOK(e.GetFinalObs()); err != nil {
			return bad(err.Error())
		}
		for k, a := range e.GetAgents() {
			if _, ok := e.GetObs()[a]; !ok || slices.Contains(e.GetAgents()[:k], a) {
				return bad(fmt.Sprintf("agent %q in agents without an observation, or listed twice", a))
			}
		}
		if acted == nil {
			if len(e.GetTransitions()) != 0 || e.GetDone() {
				return bad("reset answer has transitions")
			}
		} else {
			if len(e.GetTransitions()) != len(acted[i]) {
				return bad(fmt.Sprintf("%d transitions for %d agents that acted", len(e.GetTransitions()), len(acted[i])))
			}
			for a := range e.GetTransitions() {
				if _, ok := acted[i][a]; !ok {
					return bad(fmt.Sprintf("transition of agent %q, which did not act", a))
				}
			}
			if e.GetDone() && !p.autoreset {
				return bad("done without autoreset")
			}
			last := e.GetObs()
			if e.GetDone() {
				last = e.GetFinalObs()
			}
			for a := range acted[i] {
				if _, ok := last[a]; !ok {
					return bad(fmt.Sprintf("agent %q acted but has no observation", a))
				}
			}
		}
		// infos are the transitions' (the reset's agents' after a reset),
		// reset_infos the autoreset's agents'.
		if err := p.infosOK(e.GetInfos(), func(a string) bool {
			if acted == nil {
				return slices.Contains(e.GetAgents(), a)
			}
			_, ok := e.GetTransitions()[a]
			return ok
		}); err != nil {
			return bad("infos: " + err.Error())
		}
		if len(e.GetResetInfos()) > 0 && !e.GetDone() {
			return bad("reset infos without an autoreset")
		}
		if err := p.infosOK(e.GetResetInfos(), func(a string) bool { return slices.Contains(e.GetAgents(), a) }); err != nil {
			return bad("reset infos: " + err.Error())
		}
		finalDim := 0
		if e.GetDone() {
			finalDim = stateDim
		}
		if len(e.GetState()) != stateDim || len(e.GetFinalState()) != finalDim {
			return bad(fmt.Sprintf("global state of %d values and final state of %d, want %d and %d", len(e.GetState()), len(e.GetFinalState()), stateDim, finalDim))
		}
		s := &steps[i]
		floatsInto(s.Obs, e.GetObs())
		s.Agents = append(s.Agents[:0], e.GetAgents()...)
		clear(s.Rewards)
		clear(s.Terminations)
		clear(s.Truncations)
		clear(s.Infos)
		infos := e.GetInfos()
		for a, tr := range e.GetTransitions() {
			s.Rewards[a], s.Terminations[a], s.Truncations[a] = tr.GetReward(), tr.GetTerminated(), tr.GetTruncated()
			s.Infos[a] = wireInfo(infos[a])
		}
		if acted == nil {
			for _, a := range s.Agents {
				s.Infos[a] = wireInfo(infos[a])
			}
		}
		s.Done = e.GetDone()
		floatsInto(s.FinalObs, e.GetFinalObs())
		s.ObsInfos = s.Infos
		if s.Done {
			ri := p.resetInfos[i]
			clear(ri)
			for _, a := range s.Agents {
				ri[a] = wireInfo(e.GetResetInfos()[a])
			}
			s.ObsInfos = ri
		}
		if p.state != nil {
			s.State = append(s.State[:0], e.GetState()...)
			s.FinalState = append(s.FinalState[:0], e.GetFinalState()...)
		} else {
			s.State, s.FinalState = nil, nil
		}
	}
	return nil
}

// infosOK checks a wire infos map: every agent one that may have an info
// here (want), every action mask one bool per action of the agent's
// Discrete action space.
func (p *parallelSession) infosOK(infos map[string]*herdv1.AgentInfo, want func(string) bool) error {
	for a, in := range infos {
		if !want(a) {
			return fmt.Errorf("info of agent %q, which has no observation or transition here", a)
		}
		m := in.GetActionMask()
		if len(m) == 0 {
			continue
		}
		d, ok := p.act[p.agentIndex(a)].(env.Discrete)
		if !ok || len(m) != d.N {
			return fmt.Errorf("agent %s: action mask of %d values for action space %v", a, len(m), p.act[p.agentIndex(a)])
		}
	}
	return nil
}

// wireInfo is the Info of a wire AgentInfo (the zero Info for nil). The
// mask is the message's own slice: every answer is a new message, and the
// Info is valid until the next call, as a Parallel's are.
func wireInfo(in *herdv1.AgentInfo) env.Info {
	if m := in.GetActionMask(); len(m) > 0 {
		return env.Info{ActionMask: m}
	}
	return env.Info{}
}

// floatsInto is copyObs from wire values.
func floatsInto(dst map[string][]float32, src map[string]*herdv1.Floats) {
	for a := range dst {
		if _, ok := src[a]; !ok {
			delete(dst, a)
		}
	}
	for a, o := range src {
		dst[a] = append(dst[a][:0], o.GetValues()...)
	}
}

// Parallel is one multi-agent env served by a herd env server (a
// Parallel); MakeParallel returns it for a remote multi-agent id. Not safe
// for concurrent use.
type Parallel struct {
	p       *parallelSession
	steps   []env.ParallelStep // one env, no autoreset
	acts    []map[string][]float32
	running bool
	closed  bool
}

func (e *Parallel) PossibleAgents() []string { return e.p.possible }

// Agents is the agents still in the episode (none before Reset).
func (e *Parallel) Agents() []string { return e.steps[0].Agents }

func (e *Parallel) ObservationSpace(agent string) (env.Space, error) {
	j := e.p.agentIndex(agent)
	if j < 0 {
		return nil, fmt.Errorf("%w: no agent %q (agents %v)", env.ErrInvalidOption, agent, e.p.possible)
	}
	return e.p.obs[j], nil
}

func (e *Parallel) ActionSpace(agent string) (env.Space, error) { return e.p.actionSpace(agent) }

func (e *Parallel) Reset(seed int64) (map[string][]float32, map[string]env.Info, error) {
	if e.closed {
		return nil, nil, fmt.Errorf("%w: Parallel.Reset", env.ErrClosed)
	}
	if seed < 0 {
		seed = env.NoSeed
	}
	e.running = false
	if err := e.p.reset([]int64{seed}, e.steps); err != nil {
		return nil, nil, err
	}
	e.running = true
	return e.steps[0].Obs, e.steps[0].Infos, nil
}

func (e *Parallel) Step(actions map[string][]float32) (map[string][]float32, map[string]float64, map[string]bool, map[string]bool, map[string]env.Info, error) {
	if e.closed {
		return nil, nil, nil, nil, nil, fmt.Errorf("%w: Parallel.Step", env.ErrClosed)
	}
	if !e.running || len(e.Agents()) == 0 {
		return nil, nil, nil, nil, nil, fmt.Errorf("%w: Parallel.Step before Reset or after the episode ended", env.ErrNeedsReset)
	}
	if err := env.CheckParallelActions(e, actions); err != nil {
		return nil, nil, nil, nil, nil, err
	}
	e.acts[0] = actions
	err := e.p.step(e.acts, e.steps)
	e.acts[0] = nil
	if err != nil {
		return nil, nil, nil, nil, nil, err
	}
	s := &e.steps[0]
	return s.Obs, s.Rewards, s.Terminations, s.Truncations, s.Infos, nil
}

func (e *Parallel) Close() error {
	if e.closed {
		return nil
	}
	e.closed = true
	return e.p.Close()
}

// parallelState is a Parallel whose server sends the env's
// global state: a GlobalState, as the env is on its side.
type parallelState struct{ *Parallel }

// GlobalState is the state that came with the last Reset or Step.
func (e parallelState) GlobalState(dst []float32) []float32 {
	return append(dst[:0], e.steps[0].State...)
}

func (e parallelState) GlobalStateSpace() env.Space { return e.p.state }

// makeRemoteParallel opens one remote multi-agent env and returns the
// row options of its id.
func makeRemoteParallel(id string, o env.Options) (env.Parallel, env.FlatOptions, error) {
	t, err := parseRemote(id)
	if err != nil {
		return nil, env.FlatOptions{}, err
	}
	p, err := openParallelSession(t, 1, o, false, true)
	if err != nil {
		return nil, env.FlatOptions{}, err
	}
	rp := &Parallel{p: p, steps: env.NewParallelSteps(1), acts: make([]map[string][]float32, 1)}
	if p.state != nil {
		return parallelState{rp}, t.rows, nil
	}
	return rp, t.rows, nil
}

// makeRemoteFlatVector is makeFlatVector for a remote id: n rows of
// n / agents envs, all in one session with autoreset.
func makeRemoteFlatVector(id string, n int, o env.Options) (env.Vector, error) {
	t, err := parseRemote(id)
	if err != nil {
		return nil, err
	}
	// The number of agents, hence of envs, is the server's: a one-env
	// session asks, and is kept when one env is what the rows need.
	p, err := openParallelSession(t, 1, o, true, t.rows.State)
	if err != nil {
		return nil, err
	}
	a := len(p.possible)
	if n <= 0 || n%a != 0 {
		p.Close()
		return nil, fmt.Errorf("%w: %s has %d agents; a vector of %d rows is not a whole number of envs (num_envs counts agent rows)", env.ErrInvalidOption, id, a, n)
	}
	if n/a != 1 {
		p.Close()
		if p, err = openParallelSession(t, n/a, o, true, t.rows.State); err != nil {
			return nil, err
		}
	}
	pv := env.NewParallelVectorOf(batch{p}, n/a, p.possible, p.obs, p.act)
	fo := t.rows
	fo.EpisodeStatistics = o.EpisodeStatistics
	fo.AgentActionSpaces = o.AgentActionSpaces || fo.ActAs != ""
	f, err := env.NewFlatVector(pv, fo)
	if err != nil {
		pv.Close()
		return nil, fmt.Errorf("env: make %s: %w", id, err)
	}
	return f, nil
}

// batch is a session of n multi-agent envs as a ParallelVector steps them.
type batch struct{ *parallelSession }

func (b batch) Reset(seeds []int64, steps []env.ParallelStep) error { return b.reset(seeds, steps) }

func (b batch) Step(actions []map[string][]float32, steps []env.ParallelStep) error {
	return b.step(actions, steps)
}

func (b batch) GlobalStateSpace() env.Space { return b.state }
