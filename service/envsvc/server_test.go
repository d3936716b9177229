package envsvc

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"reflect"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"

	"herd/env"
	"herd/env/remote"
	"herd/internal/rng"
	herdv1 "herd/proto/herd/v1"
	"herd/service"
)

// startServer serves herd's envs on a loopback port until the test ends.
func startServer(t testing.TB, tlsConf *tls.Config, maxMsg int) (addr string, g *grpc.Server) {
	t.Helper()
	return startServerWith(t, tlsConf, maxMsg, Config{MaxEnvs: 64, MaxSessions: 8})
}

func startServerWith(t testing.TB, tlsConf *tls.Config, maxMsg int, cfg Config) (addr string, g *grpc.Server) {
	t.Helper()
	lis, err := service.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g = grpc.NewServer(service.ServerOptions(tlsConf, maxMsg)...)
	New(cfg).Register(g)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- service.Serve(ctx, g, lis, time.Second) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return lis.Addr().String(), g
}

// TestVectorMatchesLocal: a remote vector steps exactly as a local
// SyncVector from the same seed, batch for batch, autoresets and episode
// statistics included.
func TestVectorMatchesLocal(t *testing.T) {
	addr, _ := startServer(t, nil, 0)
	for _, id := range []string{"CartPole-v1", "Pendulum-v1"} {
		const n = 5
		local, err := envs().MakeVector(id, n, env.Sync, env.WithEpisodeStatistics(), env.WithMaxEpisodeSteps(40))
		if err != nil {
			t.Fatal(err)
		}
		remote, err := envs().MakeVector("grpc://"+addr+"/"+id, n, env.Sync, env.WithEpisodeStatistics(), env.WithMaxEpisodeSteps(40))
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(local.ObservationSpace(), local.ActionSpace()) != fmt.Sprint(remote.ObservationSpace(), remote.ActionSpace()) {
			t.Fatalf("%s spaces: local %v %v, remote %v %v", id, local.ObservationSpace(), local.ActionSpace(), remote.ObservationSpace(), remote.ActionSpace())
		}
		lb, err := local.Reset(7)
		if err != nil {
			t.Fatal(err)
		}
		rb, err := remote.Reset(7)
		if err != nil {
			t.Fatal(err)
		}
		compareBatch(t, id, -1, lb, rb, false)
		r := rng.New(1, "test/actions", 0)
		act := make([]float32, n*local.ActionSpace().Dim())
		episodes := 0
		for step := 0; step < 120; step++ {
			for i := 0; i < n; i++ {
				d := local.ActionSpace().Dim()
				local.ActionSpace().SampleTo(act[i*d:(i+1)*d], r)
			}
			if lb, err = local.Step(act); err != nil {
				t.Fatal(err)
			}
			if rb, err = remote.Step(act); err != nil {
				t.Fatal(err)
			}
			compareBatch(t, id, step, lb, rb, true)
			for i := 0; i < n; i++ {
				if lb.Infos[i].HasEpisode {
					episodes++
				}
			}
		}
		if episodes < n {
			t.Errorf("%s: only %d episodes ended; the test does not cover autoreset", id, episodes)
		}
		local.Close()
		if err := remote.Close(); err != nil {
			t.Error(err)
		}
	}
}

func compareBatch(t *testing.T, id string, step int, a, b *env.Batch, stepped bool) {
	t.Helper()
	for i := range a.Obs {
		if a.Obs[i] != b.Obs[i] {
			t.Fatalf("%s step %d: obs[%d] local %v remote %v", id, step, i, a.Obs[i], b.Obs[i])
		}
	}
	if !stepped {
		return
	}
	for i := range a.Rewards {
		if a.Rewards[i] != b.Rewards[i] || a.Terminated[i] != b.Terminated[i] || a.Truncated[i] != b.Truncated[i] || !reflect.DeepEqual(a.Infos[i], b.Infos[i]) {
			t.Fatalf("%s step %d env %d: local (%v %v %v %+v) remote (%v %v %v %+v)", id, step, i,
				a.Rewards[i], a.Terminated[i], a.Truncated[i], a.Infos[i], b.Rewards[i], b.Terminated[i], b.Truncated[i], b.Infos[i])
		}
		if a.Done(i) {
			for j, v := range a.FinalObsRow(i) {
				if v != b.FinalObsRow(i)[j] {
					t.Fatalf("%s step %d env %d: final obs differ: %v vs %v", id, step, i, a.FinalObsRow(i), b.FinalObsRow(i))
				}
			}
		}
	}
}

// TestEnvStateAndNeedsReset: a single remote env exposes its state
// (Stater), and a step after the episode ended is ErrNeedsReset carried
// back from the server; the session goes on after it.
func TestEnvStateAndNeedsReset(t *testing.T) {
	addr, _ := startServer(t, nil, 0)
	e, err := envs().Make("grpc://" + addr + "/CartPole-v1")
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if _, _, _, _, _, err := e.Step([]float32{1}); !errors.Is(err, env.ErrNeedsReset) || status.Code(errors.Unwrap(err)) == codes.OK {
		t.Fatalf("step before reset: %v, want ErrNeedsReset", err)
	}
	if _, _, err := e.Reset(3); err != nil {
		t.Fatal(err)
	}
	st, ok := env.Unwrapped(e).(env.Stater)
	if !ok {
		t.Fatal("remote env is not a Stater")
	}
	if _, err := st.SetState([]float64{0, 0, 0.19, 3}); err != nil {
		t.Fatal(err)
	}
	_, _, term, _, _, err := e.Step([]float32{1})
	if err != nil || !term {
		t.Fatalf("step from a falling pole: term %v err %v", term, err)
	}
	_, _, _, _, _, err = e.Step([]float32{1})
	if !errors.Is(err, env.ErrNeedsReset) {
		t.Fatalf("step after the end: %v, want ErrNeedsReset", err)
	}
	if s, ok := status.FromError(err); !ok || s.Code() != codes.FailedPrecondition {
		t.Fatalf("step after the end: status %v, want FailedPrecondition", s)
	}
	if _, _, err := e.Reset(env.NoSeed); err != nil {
		t.Fatalf("the session should survive an in-band error: %v", err)
	}
	if _, err := st.SetState([]float64{1, 2}); !errors.Is(err, env.ErrInvalidState) {
		t.Fatalf("short state: %v, want ErrInvalidState", err)
	}
}

// rawSession opens a Session stream with the generated client, to send what
// the Go env client never would.
func rawSession(t *testing.T, addr string) grpc.BidiStreamingClient[herdv1.EnvRequest, herdv1.EnvResponse] {
	t.Helper()
	conn, err := service.Dial(addr, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(func() { cancel(); conn.Close() })
	s, err := herdv1.NewEnvServiceClient(conn).Session(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func openMsg(version uint32, id string, n uint32) *herdv1.EnvRequest {
	return &herdv1.EnvRequest{Msg: &herdv1.EnvRequest_Open{Open: &herdv1.OpenRequest{ProtocolVersion: version, EnvId: id, NumEnvs: n, Autoreset: true}}}
}

func stepMsg(actions []float32) *herdv1.EnvRequest {
	return &herdv1.EnvRequest{Msg: &herdv1.EnvRequest_Step{Step: &herdv1.StepRequest{Actions: actions}}}
}

// TestBadInput: malformed and wrong-version messages end that stream with
// INVALID_ARGUMENT or FAILED_PRECONDITION (an oversized one with gRPC's
// RESOURCE_EXHAUSTED) while a session opened
// before them keeps working; an invalid action is answered in-band with
// INVALID_ACTION and the session goes on.
func TestBadInput(t *testing.T) {
	addr, _ := startServer(t, nil, 1<<20)
	good := resetVector(t, "grpc://"+addr+"/CartPole-v1", 2, 1)
	big := make([]float32, 300_000) // 1.2 MB on the wire, over the 1 MiB limit
	cases := []struct {
		name string
		msgs []*herdv1.EnvRequest
		want codes.Code
	}{
		{"step before open", []*herdv1.EnvRequest{stepMsg([]float32{0})}, codes.InvalidArgument},
		{"empty message", []*herdv1.EnvRequest{{}}, codes.InvalidArgument},
		{"wrong version", []*herdv1.EnvRequest{openMsg(2, "CartPole-v1", 1)}, codes.FailedPrecondition},
		{"no version", []*herdv1.EnvRequest{openMsg(0, "CartPole-v1", 1)}, codes.FailedPrecondition},
		{"too many envs", []*herdv1.EnvRequest{openMsg(1, "CartPole-v1", 65)}, codes.InvalidArgument},
		{"zero envs", []*herdv1.EnvRequest{openMsg(1, "CartPole-v1", 0)}, codes.InvalidArgument},
		{"unknown id", []*herdv1.EnvRequest{openMsg(1, "NoSuchEnv-v0", 1)}, codes.NotFound},
		{"open twice", []*herdv1.EnvRequest{openMsg(1, "CartPole-v1", 1), openMsg(1, "CartPole-v1", 1)}, codes.InvalidArgument},
		// gRPC itself answers a message over the limit, before the handler
		// sees it, with RESOURCE_EXHAUSTED.
		{"oversized", []*herdv1.EnvRequest{openMsg(1, "CartPole-v1", 1), stepMsg(big)}, codes.ResourceExhausted},
		{"bad seeds", []*herdv1.EnvRequest{openMsg(1, "CartPole-v1", 2),
			{Msg: &herdv1.EnvRequest_Reset_{Reset_: &herdv1.ResetRequest{Seeds: []int64{1}}}}}, codes.InvalidArgument},
	}
	for _, c := range cases {
		s := rawSession(t, addr)
		var err error
		for _, m := range c.msgs {
			if err = s.Send(m); err != nil {
				break
			}
		}
		for err == nil {
			_, err = s.Recv()
		}
		if status.Code(err) != c.want {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
		if _, err := good.Step([]float32{0, 1}); err != nil {
			t.Fatalf("after %s, the other session fails: %v", c.name, err)
		}
	}

	// An invalid action is answered in-band; the session survives it.
	s := rawSession(t, addr)
	for _, m := range []*herdv1.EnvRequest{openMsg(1, "CartPole-v1", 2), {Msg: &herdv1.EnvRequest_Reset_{Reset_: &herdv1.ResetRequest{}}},
		stepMsg([]float32{0, 2}), stepMsg([]float32{0, 1})} {
		if err := s.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	var answers []*herdv1.EnvResponse
	for range 4 {
		r, err := s.Recv()
		if err != nil {
			t.Fatal(err)
		}
		answers = append(answers, r)
	}
	if e := answers[2].GetError(); e.GetReason() != "INVALID_ACTION" || codes.Code(e.GetCode()) != codes.InvalidArgument {
		t.Fatalf("invalid action answered %v", answers[2])
	}
	if answers[3].GetBatch() == nil || len(answers[3].GetBatch().GetRewards()) != 2 {
		t.Fatalf("step after an invalid action answered %v", answers[3])
	}

	// The Go client rejects an invalid action before sending it.
	if _, err := good.Step([]float32{0, 2}); !errors.Is(err, env.ErrInvalidAction) {
		t.Fatalf("client-side check: %v", err)
	}
	if _, err := envs().Make("grpc://" + addr + "/NoSuchEnv-v0"); !errors.Is(err, env.ErrUnknownID) {
		t.Fatalf("unknown remote id: %v, want ErrUnknownID", err)
	}
}

// TestServerStops: a client whose server stops mid-episode gets an error,
// not a hang, and every later call fails the same way.
func TestServerStops(t *testing.T) {
	addr, g := startServer(t, nil, 0)
	v := resetVector(t, "grpc://"+addr+"/CartPole-v1?timeout=5s", 3, 1)
	g.Stop()
	start := time.Now()
	_, err := v.Step([]float32{0, 1, 0})
	if err == nil || time.Since(start) > 5*time.Second+time.Second {
		t.Fatalf("step on a stopped server: err %v after %v", err, time.Since(start))
	}
	if _, err2 := v.Step([]float32{0, 1, 0}); err2 == nil {
		t.Fatal("a broken session answered")
	}
}

// hangServer accepts sessions and answers Open, then never answers again:
// a server that hangs.
type hangServer struct {
	herdv1.UnimplementedEnvServiceServer
	release chan struct{}
}

func (h *hangServer) Session(stream grpc.BidiStreamingServer[herdv1.EnvRequest, herdv1.EnvResponse]) error {
	if _, err := stream.Recv(); err != nil {
		return err
	}
	sp, _ := remote.SpaceToProto(env.Discrete{N: 2})
	box, _ := remote.SpaceToProto(env.UniformBox(-1, 1, 4))
	if err := stream.Send(&herdv1.EnvResponse{Msg: &herdv1.EnvResponse_Open{Open: &herdv1.OpenResponse{ObservationSpace: box, ActionSpace: sp, NumEnvs: 1}}}); err != nil {
		return err
	}
	select {
	case <-stream.Context().Done():
	case <-h.release:
	}
	return nil
}

// TestDeadline: a call to a hung server fails with DeadlineExceeded once
// the id's timeout has passed.
func TestDeadline(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	h := &hangServer{release: make(chan struct{})}
	herdv1.RegisterEnvServiceServer(g, h)
	go g.Serve(lis)
	defer g.Stop()
	defer close(h.release)
	e, err := envs().Make("grpc://" + lis.Addr().String() + "/Anything-v0?timeout=200ms")
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	start := time.Now()
	_, _, err = e.Reset(1)
	if status.Code(errors.Unwrap(err)) != codes.DeadlineExceeded {
		t.Fatalf("reset on a hung server: %v", err)
	}
	if d := time.Since(start); d < 200*time.Millisecond || d > 3*time.Second {
		t.Fatalf("reset failed after %v, want about 200ms", d)
	}
}

func TestParseRemoteErrors(t *testing.T) {
	for _, id := range []string{
		"grpc://127.0.0.1/CartPole-v1",         // no port
		"grpc://127.0.0.1:1/",                  // no env id
		"grpc://127.0.0.1:1/CartPole-v1?ca=x",  // TLS parameters without grpcs
		"grpc://127.0.0.1:1/CartPole-v1?tmo=1", // unknown parameter
		"grpc://127.0.0.1:1/CartPole-v1?timeout=-1s",
		"grpc://127.0.0.1:1/CartPole-v1?spin=1us", // spin without shm
		"shm://x/CartPole-v1?spin=1ms",            // past 50us
		"shm://x/CartPole-v1?spin=-1us",
	} {
		if _, err := envs().Make(id); !errors.Is(err, env.ErrInvalidOption) {
			t.Errorf("%s: %v, want ErrInvalidOption", id, err)
		}
	}
	if _, err := envs().Make("grpc://127.0.0.1:1/CartPole-v1", env.WithKwargs(env.Kwargs{"g": 1.0})); !errors.Is(err, env.ErrInvalidOption) {
		t.Errorf("kwargs: %v", err)
	}
}

// rawCodec sends bytes as they are, to put unparseable messages on the wire.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(v.([]byte))}, nil
}
func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*(v.(*[]byte)) = data.Materialize()
	return nil
}
func (rawCodec) Name() string { return "proto" }

// TestGarbageBytes: bytes that do not parse as the protocol's message end
// that stream (gRPC itself answers INTERNAL, before the handler sees the
// message) and the server keeps serving other sessions.
func TestGarbageBytes(t *testing.T) {
	addr, _ := startServer(t, nil, 0)
	good := resetVector(t, "grpc://"+addr+"/CartPole-v1", 2, 1)
	conn, err := service.Dial(addr, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, "/herd.v1.EnvService/Session", grpc.ForceCodecV2(rawCodec{}))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SendMsg([]byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f}); err != nil {
		t.Fatal(err)
	}
	var out []byte
	err = s.RecvMsg(&out)
	t.Logf("garbage: %v", err)
	if status.Code(err) != codes.Internal {
		t.Fatalf("garbage: %v", err)
	}
	if _, err := good.Step([]float32{0, 1}); err != nil {
		t.Fatalf("the other session fails after garbage: %v", err)
	}
}

// TestMaxSessions: past MaxSessions live sessions a new one is refused at
// once, and accepted again after one ends.
func TestMaxSessions(t *testing.T) {
	addr, _ := startServer(t, nil, 0)
	var open []env.Env
	for range 8 {
		e, err := envs().Make("grpc://" + addr + "/CartPole-v1")
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, e)
	}
	if _, err := envs().Make("grpc://" + addr + "/CartPole-v1"); status.Code(errors.Unwrap(err)) != codes.ResourceExhausted {
		t.Fatalf("ninth session: %v", err)
	}
	open[0].Close()
	var err error
	for try := 0; try < 50; try++ { // the server sees the end of the stream asynchronously
		var e env.Env
		if e, err = envs().Make("grpc://" + addr + "/CartPole-v1"); err == nil {
			open[0] = e
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("after a session ended: %v", err)
	}
	for _, e := range open {
		e.Close()
	}
}

// resetVector opens the vector env id with n envs, resets it with seed and
// closes it when tb ends; any error fails tb.
func resetVector(tb testing.TB, id string, n int, seed int64) env.Vector {
	tb.Helper()
	v, err := envs().MakeVector(id, n, env.Sync)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { v.Close() })
	if _, err := v.Reset(seed); err != nil {
		tb.Fatal(err)
	}
	return v
}

// envs is the Maker of herd's programs: registered and remote ids.
func envs() env.Maker { return env.Maker{Remote: remote.Opener{}} }
