package remote

import (
	"context"
	"errors"
	"fmt"
	"herd/env"
	"io"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	herdv1 "herd/proto/herd/v1"
	"herd/service"
)

// IsID reports whether id names a remote env (grpc://, grpcs:// or
// shm://).
//
// A remote id names a multi-agent env when its server says so (see
// parallel.go and env.Maker.IsParallel).
func IsID(id string) bool {
	return strings.HasPrefix(id, "grpc://") || strings.HasPrefix(id, "grpcs://") || strings.HasPrefix(id, "shm://")
}

// remoteTarget is a parsed remote id.
type remoteTarget struct {
	addr     string // HOST:PORT, or the socket name for shm
	shm      bool
	envID    string
	tls      *service.TLSFiles
	timeout  time.Duration
	inflight int
	// rows holds agent_id, action_mask, state and act_as, row options of a
	// multi-agent env (FlatOptions), applied on this side; hasRows says one
	// was given.
	rows    env.FlatOptions
	hasRows bool
	spin    time.Duration // shm: how long to watch for a step's answer before blocking (< 0: the default)
}

func parseRemote(id string) (remoteTarget, error) {
	bad := func(format string, args ...any) (remoteTarget, error) {
		return remoteTarget{}, fmt.Errorf("%w: remote env %q: "+format, append([]any{env.ErrInvalidOption, id}, args...)...)
	}
	u, err := url.Parse(id)
	if err != nil {
		return bad("%v", err)
	}
	t := remoteTarget{addr: u.Host, envID: strings.TrimPrefix(u.Path, "/"), timeout: service.DefaultTimeout, inflight: 1, shm: u.Scheme == "shm", spin: -1}
	if t.shm {
		if t.addr == "" || strings.ContainsAny(t.addr, ":@") {
			return bad("want shm://NAME/ENV_ID, NAME the server's --shm name")
		}
	} else if t.addr == "" || u.Port() == "" {
		return bad("want grpc://HOST:PORT/ENV_ID")
	}
	if t.envID == "" {
		return bad("no env id after the address")
	}
	q := u.Query()
	files := service.TLSFiles{CA: q.Get("ca"), Cert: q.Get("cert"), Key: q.Get("key"), ServerName: q.Get("server_name")}
	for k := range q {
		switch k {
		case "ca", "cert", "key", "server_name", "timeout", "inflight", "spin":
		case "agent_id", "action_mask", "state":
			v := q.Get(k)
			if v != "true" && v != "false" {
				return bad("%s %q, want true or false", k, v)
			}
			switch k {
			case "agent_id":
				t.rows.AgentID = v == "true"
			case "action_mask":
				t.rows.ActionMask = v == "true"
			default:
				t.rows.State = v == "true"
			}
			t.hasRows = true
		case "act_as":
			// The agent whose action space a TurnEnv of the id reports:
			// a policy's own env when the agents' spaces differ.
			if t.rows.ActAs = q.Get(k); t.rows.ActAs == "" {
				return bad("act_as is empty, want an agent's name")
			}
			t.hasRows = true
		default:
			return bad("unknown parameter %q (known: ca, cert, key, server_name, timeout, inflight, spin; agent_id, action_mask, state, act_as for a multi-agent env)", k)
		}
	}
	switch u.Scheme {
	case "grpcs":
		t.tls = &files
	case "grpc", "shm":
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
	if s := q.Get("spin"); s != "" {
		d, err := time.ParseDuration(s)
		if !t.shm || err != nil || d < 0 || d > 50*time.Microsecond {
			return bad("spin %q, want a duration from 0 to 50us, with shm://", s)
		}
		t.spin = d
	}
	if s := q.Get("inflight"); s != "" {
		k, err := strconv.Atoi(s)
		if err != nil || k < 1 {
			return bad("inflight %q, want a positive integer", s)
		}
		t.inflight = k
	}
	return t, nil
}

// wire carries one session's messages, over gRPC or shared memory. send
// starts a call's deadline and recv ends it; their errors are transport
// failures (a gRPC status: DeadlineExceeded, Unavailable, ...) after which
// the wire is closed.
type wire interface {
	send(req *herdv1.EnvRequest) error
	recv() (*herdv1.EnvResponse, error)
	// attach is called once the session is open, with its shape; u8:
	// the server sends observations one byte a value.
	attach(n, obsDim, actDim int, u8 bool) error
	close() error
}

// grpcWire is one Session stream.
type grpcWire struct {
	conn     *grpc.ClientConn
	cancel   context.CancelFunc
	stream   grpc.BidiStreamingClient[herdv1.EnvRequest, herdv1.EnvResponse]
	timer    *time.Timer
	timedOut atomic.Bool
	timeout  time.Duration
}

// dialConn dials t's server (gRPC, TLS for grpcs).
func dialConn(t remoteTarget) (*grpc.ClientConn, error) {
	if t.tls == nil {
		return service.Dial(t.addr, nil, 0)
	}
	conf, err := t.tls.ClientConfig()
	if err != nil {
		return nil, err
	}
	return service.Dial(t.addr, conf, 0)
}

func dialGRPC(t remoteTarget) (*grpcWire, error) {
	w := &grpcWire{timeout: t.timeout}
	var err error
	if w.conn, err = dialConn(t); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	w.timer = time.AfterFunc(time.Hour, func() { w.timedOut.Store(true); cancel() })
	w.timer.Stop()
	w.timer.Reset(t.timeout)
	w.stream, err = herdv1.NewEnvServiceClient(w.conn).Session(ctx, grpc.WaitForReady(false))
	// The timer cancels the stream's context: gRPC then reports only
	// "context canceled", which must read as the timeout it was.
	if !w.timer.Stop() && (err == nil || w.timedOut.Load()) {
		err = w.deadlineErr()
	}
	if err != nil {
		w.close()
		return nil, err
	}
	return w, nil
}

func (w *grpcWire) deadlineErr() error {
	return status.Errorf(codes.DeadlineExceeded, "timed out: no answer within %v (the env id's timeout)", w.timeout)
}

func (w *grpcWire) send(req *herdv1.EnvRequest) error {
	w.timedOut.Store(false)
	w.timer.Reset(w.timeout)
	err := w.stream.Send(req)
	if err != nil && !errors.Is(err, io.EOF) {
		// After io.EOF from Send, Recv returns the stream's real status.
		w.timer.Stop()
		if w.timedOut.Load() {
			err = w.deadlineErr()
		}
		w.close()
		return err
	}
	return nil
}

func (w *grpcWire) recv() (*herdv1.EnvResponse, error) {
	resp, err := w.stream.Recv()
	w.timer.Stop()
	if w.timedOut.Load() {
		err = w.deadlineErr()
	}
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = status.Error(codes.Unavailable, "server closed the session")
		}
		w.close()
		return nil, err
	}
	return resp, nil
}

func (w *grpcWire) attach(n, obsDim, actDim int, u8 bool) error { return nil }

func (w *grpcWire) close() error {
	if w.stream != nil {
		w.stream.CloseSend() // the server ends the session at once
	}
	w.cancel()
	return w.conn.Close()
}

// session is one open session: n envs on the server.
type session struct {
	target   remoteTarget
	w        wire
	broken   error // set once the session failed; every later call returns it
	obs, act env.Space
	n        int
	hasState bool
	stepReq  herdv1.EnvRequest // reused for every Step
	stepMsg  herdv1.EnvRequest_Step
	stepBody herdv1.StepRequest
	// meanings are the env's action names (OpenResponse.action_meanings).
	meanings []string
	// obsBytes counts the observation bytes received: one a value in
	// Batch.obs_u8, four a float (the wire's or the shm segment's).
	obsBytes     int64
	obsU8, finU8 []float32 // obs_u8 and final_obs_u8 as floats, reused
}

// openSession dials the server and opens a session of n envs.
func openSession(t remoteTarget, n int, o env.Options, autoreset bool) (*session, error) {
	if len(o.Kwargs) > 0 {
		return nil, fmt.Errorf("%w: remote env %s: keyword arguments are not supported remotely", env.ErrInvalidOption, t.envID)
	}
	if n <= 0 {
		return nil, fmt.Errorf("%w: vector of %d envs, want > 0", env.ErrInvalidOption, n)
	}
	maxSteps := int32(o.MaxEpisodeSteps)
	if o.NoTimeLimit {
		maxSteps = -1
	}
	s := &session{target: t, n: n}
	s.stepMsg.Step = &s.stepBody
	s.stepReq.Msg = &s.stepMsg
	if err := s.dial(); err != nil {
		return nil, err
	}
	fail := func(err error) (*session, error) {
		s.Close()
		return nil, err
	}
	open, err := s.open(&herdv1.OpenRequest{
		ProtocolVersion: service.ProtocolVersion, EnvId: t.envID, NumEnvs: uint32(n),
		MaxEpisodeSteps: maxSteps, Autoreset: autoreset, ObsU8: true,
	})
	if err != nil {
		return nil, err
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
	if t.hasRows {
		return fail(fmt.Errorf("%w: remote env %s: agent_id, action_mask, state and act_as apply to multi-agent envs, and the server does not list %s as one", env.ErrInvalidOption, t.envID, t.envID))
	}
	s.hasState = open.GetHasState()
	s.meanings = open.GetActionMeanings()
	if err := s.w.attach(n, s.obs.Dim(), s.act.Dim(), open.GetObsU8()); err != nil {
		return fail(s.fail(err))
	}
	return s, nil
}

// dial connects the session's wire: shared memory for shm://, else gRPC.
func (s *session) dial() error {
	t := s.target
	if t.shm {
		w, err := dialShm(t)
		if err != nil {
			return openHint(t, s.wrap(err))
		}
		s.w = w
		return nil
	}
	w, err := dialGRPC(t)
	if err != nil {
		return openHint(t, s.wrap(err))
	}
	s.w = w
	return nil
}

// open sends the session's open request and returns the server's answer;
// on failure it closes the session.
func (s *session) open(req *herdv1.OpenRequest) (*herdv1.OpenResponse, error) {
	resp, err := s.call(&herdv1.EnvRequest{Msg: &herdv1.EnvRequest_Open{Open: req}})
	if err != nil {
		if st, ok := status.FromError(err); ok && st.Code() == codes.NotFound {
			err = fmt.Errorf("%w: %w", env.ErrUnknownID, err)
		}
		s.Close()
		return nil, openHint(s.target, err)
	}
	open := resp.GetOpen()
	if open == nil {
		err := s.protocolErr("answer to open has no open response")
		s.Close()
		return nil, err
	}
	return open, nil
}

func (s *session) where() string {
	if s.target.shm {
		return "shm://" + s.target.addr + "/" + s.target.envID
	}
	return s.target.addr + "/" + s.target.envID
}

// openHint explains an open that failed before the server said a word of
// gRPC, which gRPC reports only as an error reading the "server preface":
// an HTTP/1.x server answers in the wrong protocol (a frame "too large"); a server that accepts
// and says nothing (a black hole, a hung process) lets the read time out;
// a server that drops the connection at once gives EOF or a broken pipe,
// as a TLS server does to a plaintext client, or after the handshake to a
// client whose certificate it refuses.
func openHint(t remoteTarget, err error) error {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "looked like an HTTP/1.1 header") || (strings.Contains(msg, "server preface") && strings.Contains(msg, "frame too large")):
		return fmt.Errorf("%w (the server at %s answered, but not in HTTP/2: an HTTP/1.x web server or proxy, not a gRPC env server; check the address and port)", err, t.addr)
	case strings.Contains(msg, "server preface") && strings.Contains(msg, "timeout"):
		return fmt.Errorf("%w (the server at %s accepted the connection but sent nothing: it is not a gRPC env server, or it hangs)", err, t.addr)
	case !strings.Contains(msg, "server preface") && !strings.Contains(msg, "broken pipe") && !strings.Contains(msg, "connection reset"):
		return err
	}
	if t.tls != nil {
		return fmt.Errorf("%w (the server closed the connection right after the TLS handshake: it most likely refused this client's certificate — none given, or not signed by the CA the server trusts for clients)", err)
	}
	return fmt.Errorf("%w (the server closed the connection at once: it may require TLS, grpcs://)", err)
}

func (s *session) wrap(err error) error {
	return fmt.Errorf("env: remote %s: %w", s.where(), err)
}

// fail breaks the session with a transport error.
func (s *session) fail(err error) error {
	s.broken = s.wrap(err)
	s.w.close()
	return s.broken
}

func (s *session) protocolErr(msg string) error {
	return s.fail(status.Error(codes.Internal, msg))
}

// begin sends one request; end waits for its answer, at most the timeout
// from begin. A transport failure or timeout breaks the session; an error
// in the answer (Status) is returned mapped to a sentinel and the session
// goes on. Between begin and end the caller may begin calls on other
// sessions (pipelining).
func (s *session) begin(req *herdv1.EnvRequest) error {
	if s.broken != nil {
		return s.broken
	}
	if err := s.w.send(req); err != nil {
		return s.fail(err)
	}
	return nil
}

func (s *session) end() (*herdv1.EnvResponse, error) {
	if s.broken != nil {
		return nil, s.broken
	}
	resp, err := s.w.recv()
	if err != nil {
		return nil, s.fail(err)
	}
	if e := resp.GetError(); e != nil {
		return nil, s.wrap(statusErr(e))
	}
	return resp, nil
}

func (s *session) call(req *herdv1.EnvRequest) (*herdv1.EnvResponse, error) {
	if err := s.begin(req); err != nil {
		return nil, err
	}
	return s.end()
}

// statusErr maps an in-band Status to an error wrapping the matching
// sentinel and the gRPC status.
func statusErr(e *herdv1.Status) error {
	st := status.Error(codes.Code(e.GetCode()), e.GetMessage())
	switch e.GetReason() {
	case "INVALID_ACTION":
		return fmt.Errorf("%w: %w", env.ErrInvalidAction, st)
	case "NEEDS_RESET":
		return fmt.Errorf("%w: %w", env.ErrNeedsReset, st)
	case "INVALID_STATE":
		return fmt.Errorf("%w: %w", env.ErrInvalidState, st)
	}
	return st
}

// checkBatch checks an answer to Reset (step false) or Step.
func (s *session) checkBatch(resp *herdv1.EnvResponse, step bool) (*herdv1.Batch, error) {
	b := resp.GetBatch()
	if b == nil {
		return nil, s.protocolErr("answer has no batch")
	}
	od := s.obs.Dim()
	s.obsBytes += 4 * int64(len(b.Obs)+len(b.FinalObs))
	if len(b.ObsU8) > 0 || len(b.FinalObsU8) > 0 {
		if len(b.Obs) > 0 || len(b.FinalObs) > 0 {
			return nil, s.protocolErr("batch has observations both as floats and as bytes")
		}
		s.obsBytes += int64(len(b.ObsU8) + len(b.FinalObsU8))
		b.Obs, s.obsU8 = bytesToFloats(s.obsU8, b.ObsU8)
		b.FinalObs, s.finU8 = bytesToFloats(s.finU8, b.FinalObsU8)
	}
	if len(b.Lives) != 0 && len(b.Lives) != s.n {
		return nil, s.protocolErr(fmt.Sprintf("batch has lives of %d envs, the session %d", len(b.Lives), s.n))
	}
	if len(b.Obs) != s.n*od || (len(b.Rewards) != 0 && (len(b.Rewards) != s.n || len(b.Terminated) != s.n || len(b.Truncated) != s.n)) {
		return nil, s.protocolErr(fmt.Sprintf("batch has %d obs values, %d rewards for %d envs of obs dim %d", len(b.Obs), len(b.Rewards), s.n, od))
	}
	if step && len(b.Rewards) != s.n {
		return nil, s.protocolErr("step answer has no rewards")
	}
	return b, nil
}

// bytesToFloats writes b's bytes as float32 values 0…255 into buf (grown
// as needed) and returns the values and the buffer.
func bytesToFloats(buf []float32, b []byte) ([]float32, []float32) {
	if cap(buf) < len(b) {
		buf = make([]float32, len(b))
	}
	out := buf[:len(b)]
	for i, v := range b {
		out[i] = float32(v)
	}
	return out, buf
}

// batchInfo is env i's Info of batch b: its lives when the server sent them.
func batchInfo(b *herdv1.Batch, i int) env.Info {
	if len(b.Lives) == 0 {
		return env.Info{}
	}
	return env.Info{Lives: int(b.Lives[i]), HasLives: true}
}

func resetReq(seeds []int64) *herdv1.EnvRequest {
	return &herdv1.EnvRequest{Msg: &herdv1.EnvRequest_Reset_{Reset_: &herdv1.ResetRequest{Seeds: seeds}}}
}

func (s *session) reset(seeds []int64) (*herdv1.Batch, error) {
	resp, err := s.call(resetReq(seeds))
	if err != nil {
		return nil, err
	}
	return s.checkBatch(resp, false)
}

// beginStep sends actions; the request is reused, so actions must stay
// unchanged until endStep.
func (s *session) beginStep(actions []float32) error {
	s.stepBody.Actions = actions
	return s.begin(&s.stepReq)
}

func (s *session) endStep() (*herdv1.Batch, error) {
	resp, err := s.end()
	s.stepBody.Actions = nil
	if err != nil {
		return nil, err
	}
	return s.checkBatch(resp, true)
}

func (s *session) step(actions []float32) (*herdv1.Batch, error) {
	if err := s.beginStep(actions); err != nil {
		return nil, err
	}
	return s.endStep()
}

func (s *session) state(req *herdv1.StateRequest) (*herdv1.StateResponse, error) {
	if !s.hasState {
		return nil, fmt.Errorf("%w: remote env %s does not expose its state", env.ErrInvalidState, s.target.envID)
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
	if s.broken != nil {
		return nil
	}
	s.broken = s.wrap(env.ErrClosed)
	return s.w.close()
}

// Env is one env served by a herd env server; env.Make returns it
// (wrapped as asked) for a grpc:// id. It implements Stater when the server
// exposes the env's state. Not safe for concurrent use.
type Env struct {
	s      *session
	closed bool
}

func (e *Env) ObservationSpace() env.Space { return e.s.obs }
func (e *Env) ActionSpace() env.Space      { return e.s.act }

func (e *Env) Reset(seed int64) ([]float32, env.Info, error) {
	if e.closed {
		return nil, env.Info{}, fmt.Errorf("%w: Env.Reset", env.ErrClosed)
	}
	if seed < 0 {
		seed = env.NoSeed
	}
	b, err := e.s.reset([]int64{seed})
	if err != nil {
		return nil, env.Info{}, err
	}
	return b.Obs, batchInfo(b, 0), nil
}

func (e *Env) Step(action []float32) ([]float32, float64, bool, bool, env.Info, error) {
	if e.closed {
		return nil, 0, false, false, env.Info{}, fmt.Errorf("%w: Env.Step", env.ErrClosed)
	}
	if err := env.CheckAction(e.s.act, action); err != nil {
		return nil, 0, false, false, env.Info{}, err
	}
	b, err := e.s.step(action)
	if err != nil {
		return nil, 0, false, false, env.Info{}, err
	}
	return b.Obs, b.Rewards[0], b.Terminated[0], b.Truncated[0], batchInfo(b, 0), nil
}

// ActionMeanings are the served env's action names (ALE's
// get_action_meanings()), nil when it has none: env/atari's preset reads
// them to decide on FIRE.
func (e *Env) ActionMeanings() []string { return e.s.meanings }

// ObsBytes is the number of observation bytes the env has received: one
// a value for a uint8 image space, four a float otherwise.
func (e *Env) ObsBytes() int64 { return e.s.obsBytes }

// StateTo returns the remote env's float64 state, or nil if it cannot be
// read (no state support, or the session failed).
func (e *Env) StateTo(dst []float64) []float64 {
	st, err := e.s.state(&herdv1.StateRequest{})
	if err != nil {
		return nil
	}
	return append(dst[:0], st.State...)
}

// SetState sets the remote env's float64 state; the next Step advances
// from it.
func (e *Env) SetState(state []float64) ([]float32, error) {
	st, err := e.s.state(&herdv1.StateRequest{Set: true, State: state})
	if err != nil {
		return nil, err
	}
	return st.Obs, nil
}

func (e *Env) Close() error {
	if e.closed {
		return nil
	}
	e.closed = true
	return e.s.Close()
}

func makeRemote(id string, o env.Options) (env.Env, error) {
	t, err := parseRemote(id)
	if err != nil {
		return nil, err
	}
	s, err := openSession(t, 1, o, false)
	if err != nil {
		return nil, err
	}
	var e env.Env = &Env{s: s}
	if o.StrictActions {
		e = env.NewStrictActions(e)
	}
	if o.EpisodeStatistics {
		e = env.NewRecordEpisodeStatistics(e)
	}
	return e, nil
}

// Vector is a Vector whose n envs live on a herd env server, in one
// session (one message per Reset or Step for all of them) or, with
// inflight=K, in K sessions whose messages are in flight together.
// MakeVector returns it for a remote id. Not safe for concurrent use.
type Vector struct {
	subs   []*session
	lo     []int // subs[k] holds envs lo[k] … lo[k+1]-1
	n      int
	batch  env.Batch
	seeds  []int64
	strict bool
	stats  bool
	ret    []float64
	length []int
	closed bool
	// split is set when a pipelined step or reset succeeded in some
	// sessions and failed in others: the envs are then out of step with
	// one another until the next Reset.
	split error
}

// ObsBytes is the number of observation bytes the vector's sessions have
// received (Env.ObsBytes).
func (v *Vector) ObsBytes() int64 {
	var n int64
	for _, s := range v.subs {
		n += s.obsBytes
	}
	return n
}

func makeVector(id string, n int, o env.Options) (*Vector, error) {
	t, err := parseRemote(id)
	if err != nil {
		return nil, err
	}
	if n <= 0 {
		return nil, fmt.Errorf("%w: vector of %d envs, want > 0", env.ErrInvalidOption, n)
	}
	if t.inflight > n {
		return nil, fmt.Errorf("%w: remote env %q: inflight %d is more than the %d envs", env.ErrInvalidOption, id, t.inflight, n)
	}
	v := &Vector{n: n, seeds: make([]int64, n), strict: o.StrictActions, stats: o.EpisodeStatistics, ret: make([]float64, n), length: make([]int, n)}
	for k := 0; k < t.inflight; k++ {
		lo, hi := k*n/t.inflight, (k+1)*n/t.inflight
		s, err := openSession(t, hi-lo, o, true)
		if err != nil {
			v.Close()
			return nil, err
		}
		if k > 0 && (!reflect.DeepEqual(s.obs, v.subs[0].obs) || !reflect.DeepEqual(s.act, v.subs[0].act)) {
			s.Close()
			v.Close()
			return nil, fmt.Errorf("%w: remote env %q: sessions of one vector got different spaces", env.ErrInvalidOption, id)
		}
		v.subs = append(v.subs, s)
		v.lo = append(v.lo, lo)
	}
	v.lo = append(v.lo, n)
	v.batch = env.NewBatch(n, v.subs[0].obs.Dim())
	return v, nil
}

func (v *Vector) NumEnvs() int                { return v.n }
func (v *Vector) ObservationSpace() env.Space { return v.subs[0].obs }
func (v *Vector) ActionSpace() env.Space      { return v.subs[0].act }

// each sends one request per session with begin(k), then reads the answers
// in order with end(k, resp), reading every answer even after an error so
// that no session is left with an unread one. It returns the first error
// and, when some sessions succeeded and others failed, records the split.
func (v *Vector) each(begin func(k int) error, end func(k int) error) error {
	errs := make([]error, len(v.subs))
	for k := range v.subs {
		errs[k] = begin(k)
	}
	var first error
	failed := 0
	for k := range v.subs {
		if errs[k] == nil {
			errs[k] = end(k)
		}
		if errs[k] != nil {
			failed++
			if first == nil {
				first = errs[k]
			}
		}
	}
	if failed > 0 && failed < len(v.subs) {
		v.split = fmt.Errorf("%w: remote vector: a step or reset failed in %d of its %d sessions (%w); Reset it", env.ErrNeedsReset, failed, len(v.subs), first)
	}
	return first
}

func (v *Vector) Reset(seed int64) (*env.Batch, error) {
	if v.closed {
		return nil, fmt.Errorf("%w: Vector.Reset", env.ErrClosed)
	}
	for i := range v.seeds {
		v.seeds[i] = env.VectorSeed(seed, i)
	}
	v.split = nil
	od := v.batch.ObsDim
	err := v.each(func(k int) error {
		return v.subs[k].begin(resetReq(v.seeds[v.lo[k]:v.lo[k+1]]))
	}, func(k int) error {
		s := v.subs[k]
		resp, err := s.end()
		if err != nil {
			return err
		}
		b, err := s.checkBatch(resp, false)
		if err != nil {
			return err
		}
		copy(v.batch.Obs[v.lo[k]*od:], b.Obs)
		return nil
	})
	if err != nil {
		return nil, err
	}
	for i := range v.batch.Rewards {
		v.batch.Rewards[i], v.batch.Terminated[i], v.batch.Truncated[i], v.batch.Infos[i] = 0, false, false, env.Info{}
		v.ret[i], v.length[i] = 0, 0
	}
	return &v.batch, nil
}

func (v *Vector) Step(actions []float32) (*env.Batch, error) {
	if v.closed {
		return nil, fmt.Errorf("%w: Vector.Step", env.ErrClosed)
	}
	if v.split != nil {
		return nil, v.split
	}
	act := v.subs[0].act
	// Every check is made here, before any session steps, so that a bad
	// action never leaves some sub-batches stepped and others not.
	if err := env.CheckActions(act, v.n, actions); err != nil {
		return nil, err
	}
	if box, ok := act.(env.Box); ok && v.strict {
		d := box.Dim()
		for i := 0; i < v.n; i++ {
			if err := box.CheckBounds(actions[i*d : (i+1)*d]); err != nil {
				return nil, fmt.Errorf("vector slot %d: %w", i, err)
			}
		}
	}
	ad := act.Dim()
	err := v.each(func(k int) error {
		return v.subs[k].beginStep(actions[v.lo[k]*ad : v.lo[k+1]*ad])
	}, func(k int) error {
		b, err := v.subs[k].endStep()
		if err != nil {
			return err
		}
		return v.merge(k, b)
	})
	if err != nil {
		return nil, err
	}
	return &v.batch, nil
}

// merge copies session k's step answer into the vector's batch.
func (v *Vector) merge(k int, b *herdv1.Batch) error {
	od, lo, s := v.batch.ObsDim, v.lo[k], v.subs[k]
	done := 0
	for i := range b.Rewards {
		if b.Terminated[i] || b.Truncated[i] {
			done++
		}
	}
	if len(b.FinalObs) != done*od {
		return s.protocolErr(fmt.Sprintf("step answer has %d final obs values for %d ended episodes", len(b.FinalObs), done))
	}
	copy(v.batch.Obs[lo*od:], b.Obs)
	j := 0
	for i, r := range b.Rewards {
		g := lo + i
		v.batch.Rewards[g] = float32(r)
		v.batch.Terminated[g], v.batch.Truncated[g] = b.Terminated[i], b.Truncated[i]
		v.batch.Infos[g] = batchInfo(b, i)
		v.ret[g] += r
		v.length[g]++
		if b.Terminated[i] || b.Truncated[i] {
			copy(v.batch.FinalObs[g*od:(g+1)*od], b.FinalObs[j*od:(j+1)*od])
			j++
			if v.stats {
				v.batch.Infos[g].HasEpisode = true
				v.batch.Infos[g].Episode = env.EpisodeStats{Return: v.ret[g], Length: v.length[g]}
			}
			v.ret[g], v.length[g] = 0, 0
		}
	}
	return nil
}

func (v *Vector) Close() error {
	if v.closed {
		return nil
	}
	v.closed = true
	var first error
	for _, s := range v.subs {
		if err := s.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
