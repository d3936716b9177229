package env

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	herdv1 "herd/proto/herd/v1"
	"herd/service"
)

// Remote envs: an id of the form
//
//	grpc://HOST:PORT/ENV_ID[?timeout=30s]
//	grpcs://HOST:PORT/ENV_ID[?ca=FILE&cert=FILE&key=FILE&server_name=NAME&timeout=30s]
//
// makes Make and MakeVector open a session on a herd env server (herd serve
// env, or Python's herd_env.serve) instead of building the env here. grpcs
// uses TLS: ca verifies the server (default: the system roots), cert and key
// are the client certificate for servers that require one (mTLS). timeout
// bounds every call, Reset and Step included; a call that runs past it, or
// whose server died, fails with a gRPC status error and the session is then
// unusable (Close it and make a new one).
//
// MakeVector puts all n envs in ONE session, so one message carries the n
// actions and one message the n results. The server resets ended episodes
// in the same step (the Vector convention). WithEpisodeStatistics and
// WithStrictActions are applied on this side; WithMaxEpisodeSteps and
// WithoutTimeLimit are sent to the server; WithKwargs is not supported.
//
// Errors the session survives come back in the answer as a status and are
// mapped to this package's sentinels: an action outside the space wraps
// ErrInvalidAction (and the gRPC status, InvalidArgument), a step that needs
// a reset ErrNeedsReset, a bad state ErrInvalidState.

// IsRemote reports whether id names a remote env (grpc:// or grpcs://).
func IsRemote(id string) bool {
	return strings.HasPrefix(id, "grpc://") || strings.HasPrefix(id, "grpcs://")
}

// remoteTarget is a parsed remote id.
type remoteTarget struct {
	addr    string
	envID   string
	tls     *service.TLSFiles
	timeout time.Duration
}

func parseRemote(id string) (remoteTarget, error) {
	bad := func(format string, args ...any) (remoteTarget, error) {
		return remoteTarget{}, fmt.Errorf("%w: remote env %q: "+format, append([]any{ErrInvalidOption, id}, args...)...)
	}
	u, err := url.Parse(id)
	if err != nil {
		return bad("%v", err)
	}
	t := remoteTarget{addr: u.Host, envID: strings.TrimPrefix(u.Path, "/"), timeout: service.DefaultTimeout}
	if t.addr == "" || u.Port() == "" {
		return bad("want grpc://HOST:PORT/ENV_ID")
	}
	if t.envID == "" {
		return bad("no env id after the address")
	}
	q := u.Query()
	files := service.TLSFiles{CA: q.Get("ca"), Cert: q.Get("cert"), Key: q.Get("key"), ServerName: q.Get("server_name")}
	for k := range q {
		switch k {
		case "ca", "cert", "key", "server_name", "timeout":
		default:
			return bad("unknown parameter %q (known: ca, cert, key, server_name, timeout)", k)
		}
	}
	switch u.Scheme {
	case "grpcs":
		t.tls = &files
	case "grpc":
		if files.Enabled() || files.ServerName != "" {
			return bad("TLS parameters need the grpcs:// scheme")
		}
	}
	if s := q.Get("timeout"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return bad("timeout %q, want a positive duration such as 30s", s)
		}
		t.timeout = d
	}
	return t, nil
}

// session is one open Session stream: n envs on the server.
type session struct {
	target   remoteTarget
	conn     *grpc.ClientConn
	cancel   context.CancelFunc
	stream   grpc.BidiStreamingClient[herdv1.EnvRequest, herdv1.EnvResponse]
	timer    *time.Timer
	timedOut atomic.Bool
	broken   error // set once the stream failed; every later call returns it
	obs, act Space
	n        int
	hasState bool
}

// openSession dials the server and opens a session of n envs.
func openSession(t remoteTarget, n int, o makeOptions, autoreset bool) (*session, error) {
	if len(o.kwargs) > 0 {
		return nil, fmt.Errorf("%w: remote env %s: keyword arguments are not supported remotely", ErrInvalidOption, t.envID)
	}
	if n <= 0 {
		return nil, fmt.Errorf("%w: vector of %d envs, want > 0", ErrInvalidOption, n)
	}
	maxSteps := int32(o.maxSteps)
	if o.noTimeLimit {
		maxSteps = -1
	}
	var err error
	s := &session{target: t, n: n}
	if t.tls != nil {
		conf, err := t.tls.ClientConfig()
		if err != nil {
			return nil, err
		}
		s.conn, err = service.Dial(t.addr, conf, 0)
		if err != nil {
			return nil, err
		}
	} else if s.conn, err = service.Dial(t.addr, nil, 0); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.timer = time.AfterFunc(time.Hour, func() { s.timedOut.Store(true); cancel() })
	s.timer.Stop()
	fail := func(err error) (*session, error) {
		s.Close()
		return nil, err
	}
	s.timer.Reset(t.timeout)
	s.stream, err = herdv1.NewEnvServiceClient(s.conn).Session(ctx, grpc.WaitForReady(false))
	if !s.timer.Stop() && err == nil {
		err = s.deadlineErr()
	}
	if err != nil {
		return fail(openHint(t, s.wrap(err)))
	}
	resp, err := s.call(&herdv1.EnvRequest{Msg: &herdv1.EnvRequest_Open{Open: &herdv1.OpenRequest{
		ProtocolVersion: service.ProtocolVersion, EnvId: t.envID, NumEnvs: uint32(n),
		MaxEpisodeSteps: maxSteps, Autoreset: autoreset,
	}}})
	if err != nil {
		if st, ok := status.FromError(err); ok && st.Code() == codes.NotFound {
			err = fmt.Errorf("%w: %w", ErrUnknownID, err)
		}
		return fail(openHint(t, err))
	}
	open := resp.GetOpen()
	if open == nil {
		return fail(s.protocolErr("answer to open has no open response"))
	}
	if s.obs, err = SpaceFromProto(open.GetObservationSpace()); err != nil {
		return fail(err)
	}
	if s.act, err = SpaceFromProto(open.GetActionSpace()); err != nil {
		return fail(err)
	}
	if open.GetNumEnvs() != uint32(n) {
		return fail(s.protocolErr(fmt.Sprintf("server opened %d envs, asked for %d", open.GetNumEnvs(), n)))
	}
	s.hasState = open.GetHasState()
	return s, nil
}

// openHint explains an open that failed because the server dropped the
// connection at once, which gRPC reports only as "error reading server
// preface: EOF" or a broken pipe: a TLS server refusing the client's
// certificate does exactly that after the handshake.
func openHint(t remoteTarget, err error) error {
	msg := err.Error()
	if !strings.Contains(msg, "server preface") && !strings.Contains(msg, "broken pipe") && !strings.Contains(msg, "connection reset") {
		return err
	}
	if t.tls != nil {
		return fmt.Errorf("%w (the server closed the connection right after the TLS handshake: it most likely refused this client's certificate — none given, or not signed by the CA the server trusts for clients)", err)
	}
	return fmt.Errorf("%w (the server closed the connection at once: it may require TLS, grpcs://)", err)
}

func (s *session) deadlineErr() error {
	return status.Errorf(codes.DeadlineExceeded, "no answer within %v", s.target.timeout)
}

func (s *session) wrap(err error) error {
	return fmt.Errorf("env: remote %s/%s: %w", s.target.addr, s.target.envID, err)
}

func (s *session) protocolErr(msg string) error {
	s.broken = s.wrap(status.Error(codes.Internal, msg))
	s.cancel()
	return s.broken
}

// call sends one request and waits for its answer, at most the timeout.
// A transport failure or timeout breaks the session; an error in the
// answer (Status) is returned mapped to a sentinel and the session goes on.
func (s *session) call(req *herdv1.EnvRequest) (*herdv1.EnvResponse, error) {
	if s.broken != nil {
		return nil, s.broken
	}
	s.timedOut.Store(false)
	s.timer.Reset(s.target.timeout)
	err := s.stream.Send(req)
	var resp *herdv1.EnvResponse
	if err == nil || errors.Is(err, io.EOF) {
		// After io.EOF from Send, Recv returns the stream's real status.
		resp, err = s.stream.Recv()
	}
	s.timer.Stop()
	if s.timedOut.Load() {
		err = s.deadlineErr()
	}
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = status.Error(codes.Unavailable, "server closed the session")
		}
		s.broken = s.wrap(err)
		s.cancel()
		return nil, s.broken
	}
	if e := resp.GetError(); e != nil {
		return nil, s.wrap(statusErr(e))
	}
	return resp, nil
}

// statusErr maps an in-band Status to an error wrapping the matching
// sentinel and the gRPC status.
func statusErr(e *herdv1.Status) error {
	st := status.Error(codes.Code(e.GetCode()), e.GetMessage())
	switch e.GetReason() {
	case "INVALID_ACTION":
		return fmt.Errorf("%w: %w", ErrInvalidAction, st)
	case "NEEDS_RESET":
		return fmt.Errorf("%w: %w", ErrNeedsReset, st)
	case "INVALID_STATE":
		return fmt.Errorf("%w: %w", ErrInvalidState, st)
	}
	return st
}

func (s *session) batch(req *herdv1.EnvRequest) (*herdv1.Batch, error) {
	resp, err := s.call(req)
	if err != nil {
		return nil, err
	}
	b := resp.GetBatch()
	if b == nil {
		return nil, s.protocolErr("answer has no batch")
	}
	od := s.obs.Dim()
	if len(b.Obs) != s.n*od || (len(b.Rewards) != 0 && (len(b.Rewards) != s.n || len(b.Terminated) != s.n || len(b.Truncated) != s.n)) {
		return nil, s.protocolErr(fmt.Sprintf("batch has %d obs values, %d rewards for %d envs of obs dim %d", len(b.Obs), len(b.Rewards), s.n, od))
	}
	return b, nil
}

func (s *session) reset(seeds []int64) (*herdv1.Batch, error) {
	return s.batch(&herdv1.EnvRequest{Msg: &herdv1.EnvRequest_Reset_{Reset_: &herdv1.ResetRequest{Seeds: seeds}}})
}

func (s *session) step(actions []float32) (*herdv1.Batch, error) {
	b, err := s.batch(&herdv1.EnvRequest{Msg: &herdv1.EnvRequest_Step{Step: &herdv1.StepRequest{Actions: actions}}})
	if err != nil {
		return nil, err
	}
	if len(b.Rewards) != s.n {
		return nil, s.protocolErr("step answer has no rewards")
	}
	return b, nil
}

func (s *session) state(req *herdv1.StateRequest) (*herdv1.StateResponse, error) {
	if !s.hasState {
		return nil, fmt.Errorf("%w: remote env %s does not expose its state", ErrInvalidState, s.target.envID)
	}
	resp, err := s.call(&herdv1.EnvRequest{Msg: &herdv1.EnvRequest_State{State: req}})
	if err != nil {
		return nil, err
	}
	if resp.GetState() == nil {
		return nil, s.protocolErr("answer has no state")
	}
	return resp.GetState(), nil
}

// Close ends the session (the server closes its envs) and the connection.
func (s *session) Close() error {
	if s.stream != nil && s.broken == nil {
		s.stream.CloseSend()
	}
	s.cancel()
	if s.broken == nil {
		s.broken = s.wrap(ErrClosed)
	}
	return s.conn.Close()
}

// RemoteEnv is one env served by a herd env server; env.Make returns it
// (wrapped as asked) for a grpc:// id. It implements Stater when the server
// exposes the env's state. Not safe for concurrent use.
type RemoteEnv struct {
	s      *session
	closed bool
}

func (e *RemoteEnv) ObservationSpace() Space { return e.s.obs }
func (e *RemoteEnv) ActionSpace() Space      { return e.s.act }

func (e *RemoteEnv) Reset(seed int64) ([]float32, Info, error) {
	if e.closed {
		return nil, Info{}, fmt.Errorf("%w: RemoteEnv.Reset", ErrClosed)
	}
	if seed < 0 {
		seed = NoSeed
	}
	b, err := e.s.reset([]int64{seed})
	if err != nil {
		return nil, Info{}, err
	}
	return b.Obs, Info{}, nil
}

func (e *RemoteEnv) Step(action []float32) ([]float32, float64, bool, bool, Info, error) {
	if e.closed {
		return nil, 0, false, false, Info{}, fmt.Errorf("%w: RemoteEnv.Step", ErrClosed)
	}
	if err := CheckAction(e.s.act, action); err != nil {
		return nil, 0, false, false, Info{}, err
	}
	b, err := e.s.step(action)
	if err != nil {
		return nil, 0, false, false, Info{}, err
	}
	return b.Obs, b.Rewards[0], b.Terminated[0], b.Truncated[0], Info{}, nil
}

// StateTo returns the remote env's float64 state, or nil if it cannot be
// read (no state support, or the session failed).
func (e *RemoteEnv) StateTo(dst []float64) []float64 {
	st, err := e.s.state(&herdv1.StateRequest{})
	if err != nil {
		return nil
	}
	return append(dst[:0], st.State...)
}

// SetState sets the remote env's float64 state; the next Step advances
// from it.
func (e *RemoteEnv) SetState(state []float64) ([]float32, error) {
	st, err := e.s.state(&herdv1.StateRequest{Set: true, State: state})
	if err != nil {
		return nil, err
	}
	return st.Obs, nil
}

func (e *RemoteEnv) Close() error {
	if e.closed {
		return nil
	}
	e.closed = true
	return e.s.Close()
}

func makeRemote(id string, o makeOptions) (Env, error) {
	t, err := parseRemote(id)
	if err != nil {
		return nil, err
	}
	s, err := openSession(t, 1, o, false)
	if err != nil {
		return nil, err
	}
	var e Env = &RemoteEnv{s: s}
	if o.strict {
		e = NewStrictActions(e)
	}
	if o.stats {
		e = NewRecordEpisodeStatistics(e)
	}
	return e, nil
}

// RemoteVector is a Vector whose n envs live in one session on a herd env
// server: one message per Reset or Step for all of them. MakeVector returns
// it for a grpc:// id. Not safe for concurrent use.
type RemoteVector struct {
	s      *session
	batch  Batch
	seeds  []int64
	strict bool
	stats  bool
	ret    []float64
	length []int
	closed bool
}

func makeRemoteVector(id string, n int, o makeOptions) (*RemoteVector, error) {
	t, err := parseRemote(id)
	if err != nil {
		return nil, err
	}
	s, err := openSession(t, n, o, true)
	if err != nil {
		return nil, err
	}
	return &RemoteVector{s: s, batch: newBatch(n, s.obs.Dim()), seeds: make([]int64, n),
		strict: o.strict, stats: o.stats, ret: make([]float64, n), length: make([]int, n)}, nil
}

func (v *RemoteVector) NumEnvs() int            { return v.s.n }
func (v *RemoteVector) ObservationSpace() Space { return v.s.obs }
func (v *RemoteVector) ActionSpace() Space      { return v.s.act }

func (v *RemoteVector) Reset(seed int64) (*Batch, error) {
	if v.closed {
		return nil, fmt.Errorf("%w: RemoteVector.Reset", ErrClosed)
	}
	for i := range v.seeds {
		v.seeds[i] = VectorSeed(seed, i)
	}
	b, err := v.s.reset(v.seeds)
	if err != nil {
		return nil, err
	}
	copy(v.batch.Obs, b.Obs)
	for i := range v.batch.Rewards {
		v.batch.Rewards[i], v.batch.Terminated[i], v.batch.Truncated[i], v.batch.Infos[i] = 0, false, false, Info{}
		v.ret[i], v.length[i] = 0, 0
	}
	return &v.batch, nil
}

func (v *RemoteVector) Step(actions []float32) (*Batch, error) {
	if v.closed {
		return nil, fmt.Errorf("%w: RemoteVector.Step", ErrClosed)
	}
	if err := checkActions(v.s.act, v.s.n, actions); err != nil {
		return nil, err
	}
	if box, ok := v.s.act.(Box); ok && v.strict {
		d := box.Dim()
		for i := 0; i < v.s.n; i++ {
			if err := box.CheckBounds(actions[i*d : (i+1)*d]); err != nil {
				return nil, fmt.Errorf("vector slot %d: %w", i, err)
			}
		}
	}
	b, err := v.s.step(actions)
	if err != nil {
		return nil, err
	}
	od := v.batch.ObsDim
	done := 0
	for i := range v.batch.Rewards {
		if b.Terminated[i] || b.Truncated[i] {
			done++
		}
	}
	if len(b.FinalObs) != done*od {
		return nil, v.s.protocolErr(fmt.Sprintf("step answer has %d final obs values for %d ended episodes", len(b.FinalObs), done))
	}
	copy(v.batch.Obs, b.Obs)
	k := 0
	for i, r := range b.Rewards {
		v.batch.Rewards[i] = float32(r)
		v.batch.Terminated[i], v.batch.Truncated[i] = b.Terminated[i], b.Truncated[i]
		v.batch.Infos[i] = Info{}
		v.ret[i] += r
		v.length[i]++
		if b.Terminated[i] || b.Truncated[i] {
			copy(v.batch.FinalObs[i*od:(i+1)*od], b.FinalObs[k*od:(k+1)*od])
			k++
			if v.stats {
				v.batch.Infos[i] = Info{HasEpisode: true, Episode: EpisodeStats{Return: v.ret[i], Length: v.length[i]}}
			}
			v.ret[i], v.length[i] = 0, 0
		}
	}
	return &v.batch, nil
}

func (v *RemoteVector) Close() error {
	if v.closed {
		return nil
	}
	v.closed = true
	return v.s.Close()
}
