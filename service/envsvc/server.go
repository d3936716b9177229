package envsvc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"herd/env"
	"herd/env/remote"
	herdv1 "herd/proto/herd/v1"
	"herd/service"
)

// DefaultMaxEnvs bounds num_envs of one session unless Config says otherwise.
const DefaultMaxEnvs = 4096

// DefaultMaxSessions bounds the live sessions of a server unless Config
// says otherwise.
const DefaultMaxSessions = 256

// Config configures a Server.
type Config struct {
	// MaxEnvs bounds the envs of one session (default DefaultMaxEnvs).
	MaxEnvs int
	// MaxSessions bounds the live sessions; a session past it is refused at
	// once with RESOURCE_EXHAUSTED (default DefaultMaxSessions).
	MaxSessions int
	// ParallelEnvs serves multi-agent envs of your own beside the
	// registered ones (env.ParallelIDs): each id maps to a function that
	// makes one env, called once per env of a session. Describe lists the
	// ids among parallel_env_ids; an id here hides a registered one.
	ParallelEnvs map[string]func() (env.Parallel, error)
}

// Server implements herdv1.EnvServiceServer over env.Make.
type Server struct {
	herdv1.UnimplementedEnvServiceServer
	maxEnvs  int
	sessions chan struct{} // one token per live session
	metrics  *serverMetrics
	parallel map[string]func() (env.Parallel, error) // Config.ParallelEnvs
}

// New returns a Server.
func New(cfg Config) *Server {
	if cfg.MaxEnvs <= 0 {
		cfg.MaxEnvs = DefaultMaxEnvs
	}
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = DefaultMaxSessions
	}
	return &Server{maxEnvs: cfg.MaxEnvs, sessions: make(chan struct{}, cfg.MaxSessions), parallel: maps.Clone(cfg.ParallelEnvs)}
}

// RegisterMetrics registers the server's Prometheus collectors (sessions,
// env steps, episodes, step latency; see metrics.go) on reg. Call it
// before serving; sessions opened before it are not counted.
func (s *Server) RegisterMetrics(reg prometheus.Registerer) error {
	if reg == nil {
		return fmt.Errorf("envsvc: metrics need a registerer")
	}
	m, err := newServerMetrics(reg, s)
	if err != nil {
		return err
	}
	s.metrics = m
	return nil
}

// Register adds the service to g.
func (s *Server) Register(g *grpc.Server) { herdv1.RegisterEnvServiceServer(g, s) }

// Describe lists the protocol version, env.IDs and the multi-agent ids
// (env.ParallelIDs and Config.ParallelEnvs).
func (s *Server) Describe(context.Context, *herdv1.DescribeRequest) (*herdv1.DescribeResponse, error) {
	ids := env.ParallelIDs()
	for _, id := range slices.Sorted(maps.Keys(s.parallel)) {
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	return &herdv1.DescribeResponse{ProtocolVersions: []uint32{service.ProtocolVersion}, EnvIds: env.IDs(), ParallelEnvIds: ids, Server: "herd"}, nil
}

// Session runs one client's envs until the client closes the stream.
func (s *Server) Session(stream grpc.BidiStreamingServer[herdv1.EnvRequest, herdv1.EnvResponse]) error {
	select {
	case s.sessions <- struct{}{}:
		defer func() { <-s.sessions }()
	default:
		s.metrics.refuse()
		return status.Errorf(codes.ResourceExhausted, "server has %d live sessions, its limit", cap(s.sessions))
	}
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	var sess streamSession
	if first.GetOpen().GetParallel() {
		sess, err = s.openParallel(first)
	} else {
		sess, err = s.open(first)
	}
	if err != nil {
		return err
	}
	defer sess.close()
	resp, err := sess.openResponse()
	if err != nil {
		return err
	}
	if err := stream.Send(resp); err != nil {
		return err
	}
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		resp, err := sess.handle(req)
		if err != nil {
			return err
		}
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
}

// streamSession is an open session, single-agent (session) or
// multi-agent (parallelSession).
type streamSession interface {
	openResponse() (*herdv1.EnvResponse, error)
	handle(req *herdv1.EnvRequest) (*herdv1.EnvResponse, error)
	close()
}

// checkOpen checks what every session's first message must hold and
// returns the number of envs.
func (s *Server) checkOpen(first *herdv1.EnvRequest) (int, error) {
	open := first.GetOpen()
	if open == nil {
		return 0, status.Error(codes.InvalidArgument, "the first message of a session must be open")
	}
	if open.GetProtocolVersion() != service.ProtocolVersion {
		return 0, status.Errorf(codes.FailedPrecondition, "protocol version %d; this server speaks %d", open.GetProtocolVersion(), service.ProtocolVersion)
	}
	n := int(open.GetNumEnvs())
	if n <= 0 || n > s.maxEnvs {
		return 0, status.Errorf(codes.InvalidArgument, "num_envs %d, want 1..%d", n, s.maxEnvs)
	}
	return n, nil
}

// open checks a single-agent session's first message and makes its envs.
func (s *Server) open(first *herdv1.EnvRequest) (*session, error) {
	n, err := s.checkOpen(first)
	if err != nil {
		return nil, err
	}
	open := first.GetOpen()
	sess, err := newSession(open, n)
	if err == nil {
		sess.metrics = s.metrics
		s.metrics.open()
	}
	return sess, err
}

// session is one stream's envs.
type session struct {
	envs      []env.Env
	obs, act  env.Space
	autoreset bool
	batch     herdv1.Batch
	metrics   *serverMetrics
}

func newSession(open *herdv1.OpenRequest, n int) (*session, error) {
	var opts []env.Option
	switch m := open.GetMaxEpisodeSteps(); {
	case m > 0:
		opts = append(opts, env.WithMaxEpisodeSteps(int(m)))
	case m < 0:
		opts = append(opts, env.WithoutTimeLimit())
	}
	id := open.GetEnvId()
	if remote.IsID(id) {
		return nil, status.Errorf(codes.InvalidArgument, "env id %q: a server does not open remote envs", id)
	}
	s := &session{autoreset: open.GetAutoreset()}
	for i := 0; i < n; i++ {
		e, err := env.Make(id, opts...)
		if err != nil {
			s.close()
			if errors.Is(err, env.ErrUnknownID) {
				return nil, status.Error(codes.NotFound, err.Error())
			}
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
		s.envs = append(s.envs, e)
	}
	s.obs, s.act = s.envs[0].ObservationSpace(), s.envs[0].ActionSpace()
	s.batch = herdv1.Batch{
		Obs:        make([]float32, n*s.obs.Dim()),
		Rewards:    make([]float64, n),
		Terminated: make([]bool, n),
		Truncated:  make([]bool, n),
	}
	return s, nil
}

func (s *session) close() {
	for _, e := range s.envs {
		e.Close()
	}
}

func (s *session) openResponse() (*herdv1.EnvResponse, error) {
	obs, err := remote.SpaceToProto(s.obs)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	act, err := remote.SpaceToProto(s.act)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	_, hasState := env.Unwrapped(s.envs[0]).(env.Stater)
	return &herdv1.EnvResponse{Msg: &herdv1.EnvResponse_Open{Open: &herdv1.OpenResponse{
		ObservationSpace: obs, ActionSpace: act, NumEnvs: uint32(len(s.envs)), HasState: hasState,
	}}}, nil
}

// handle answers one request. A returned error ends the stream (a malformed
// request); env errors are answered in-band.
func (s *session) handle(req *herdv1.EnvRequest) (*herdv1.EnvResponse, error) {
	switch m := req.GetMsg().(type) {
	case *herdv1.EnvRequest_Reset_:
		return s.reset(m.Reset_.GetSeeds())
	case *herdv1.EnvRequest_Step:
		return s.step(m.Step.GetActions()), nil
	case *herdv1.EnvRequest_State:
		return s.state(m.State)
	case *herdv1.EnvRequest_Open:
		return nil, status.Error(codes.InvalidArgument, "open sent twice in one session")
	}
	return nil, status.Error(codes.InvalidArgument, "empty request")
}

func (s *session) reset(seeds []int64) (*herdv1.EnvResponse, error) {
	if len(seeds) != 0 && len(seeds) != len(s.envs) {
		return nil, status.Errorf(codes.InvalidArgument, "reset with %d seeds for %d envs", len(seeds), len(s.envs))
	}
	d := s.obs.Dim()
	for i, e := range s.envs {
		seed := env.NoSeed
		if len(seeds) > 0 && seeds[i] >= 0 {
			seed = seeds[i]
		}
		obs, _, err := e.Reset(seed)
		if err != nil {
			return inBand(err), nil
		}
		copy(s.batch.Obs[i*d:(i+1)*d], obs)
	}
	return &herdv1.EnvResponse{Msg: &herdv1.EnvResponse_Batch{Batch: &herdv1.Batch{Obs: s.batch.Obs}}}, nil
}

// step checks every action before stepping any env, so an invalid one
// leaves all envs untouched.
func (s *session) step(actions []float32) *herdv1.EnvResponse {
	n, ad, od := len(s.envs), s.act.Dim(), s.obs.Dim()
	if len(actions) != n*ad {
		return inBand(fmt.Errorf("%w: %d envs want %d×%d action values, got %d", env.ErrInvalidAction, n, n, ad, len(actions)))
	}
	for i := 0; i < n; i++ {
		if err := env.CheckAction(s.act, actions[i*ad:(i+1)*ad]); err != nil {
			return inBand(fmt.Errorf("env %d: %w", i, err))
		}
	}
	b := &s.batch
	b.FinalObs = b.FinalObs[:0]
	var t0 time.Time
	if s.metrics != nil {
		t0 = time.Now()
	}
	ended := 0
	for i, e := range s.envs {
		obs, r, term, trunc, _, err := e.Step(actions[i*ad : (i+1)*ad])
		if err != nil {
			return inBand(fmt.Errorf("env %d: %w", i, err))
		}
		if term || trunc {
			ended++
		}
		b.Rewards[i], b.Terminated[i], b.Truncated[i] = r, term, trunc
		if s.autoreset && (term || trunc) {
			b.FinalObs = append(b.FinalObs, obs...)
			if obs, _, err = e.Reset(env.NoSeed); err != nil {
				return inBand(fmt.Errorf("env %d: autoreset: %w", i, err))
			}
		}
		copy(b.Obs[i*od:(i+1)*od], obs)
	}
	s.metrics.step(n, ended, t0)
	return &herdv1.EnvResponse{Msg: &herdv1.EnvResponse_Batch{Batch: b}}
}

func (s *session) state(req *herdv1.StateRequest) (*herdv1.EnvResponse, error) {
	idx := int(req.GetIndex())
	if idx >= len(s.envs) {
		return nil, status.Errorf(codes.InvalidArgument, "state of env %d of %d", idx, len(s.envs))
	}
	st, ok := env.Unwrapped(s.envs[idx]).(env.Stater)
	if !ok {
		return &herdv1.EnvResponse{Error: &herdv1.Status{Code: int32(codes.Unimplemented), Reason: "UNSUPPORTED", Message: "env has no state access"}}, nil
	}
	resp := &herdv1.StateResponse{}
	if req.GetSet() {
		obs, err := st.SetState(req.GetState())
		if err != nil {
			return inBand(err), nil
		}
		resp.Obs = append([]float32(nil), obs...)
	}
	resp.State = st.StateTo(nil)
	return &herdv1.EnvResponse{Msg: &herdv1.EnvResponse_State{State: resp}}, nil
}

// inBand turns an env error into the Status answer the session survives.
func inBand(err error) *herdv1.EnvResponse {
	st := &herdv1.Status{Code: int32(codes.Internal), Reason: "ENV_ERROR", Message: err.Error()}
	switch {
	case errors.Is(err, env.ErrInvalidAction):
		st.Code, st.Reason = int32(codes.InvalidArgument), "INVALID_ACTION"
	case errors.Is(err, env.ErrNeedsReset):
		st.Code, st.Reason = int32(codes.FailedPrecondition), "NEEDS_RESET"
	case errors.Is(err, env.ErrInvalidState):
		st.Code, st.Reason = int32(codes.InvalidArgument), "INVALID_STATE"
	}
	return &herdv1.EnvResponse{Error: st}
}
