package envsvc

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"herd/env"
	herdv1 "herd/proto/herd/v1"
	"herd/service"
)

// tamperServer is herd's multi-agent session with its answers changed
// before they are sent: a server that breaks the protocol.
type tamperServer struct {
	herdv1.UnimplementedEnvServiceServer
	s     *Server
	open  func(*herdv1.ParallelSpaces)
	batch func(step int, b *herdv1.ParallelBatch)
}

func (f *tamperServer) Describe(ctx context.Context, r *herdv1.DescribeRequest) (*herdv1.DescribeResponse, error) {
	return f.s.Describe(ctx, r)
}

func (f *tamperServer) Session(stream grpc.BidiStreamingServer[herdv1.EnvRequest, herdv1.EnvResponse]) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	sess, err := f.s.openParallel(first)
	if err != nil {
		return err
	}
	defer sess.close()
	resp, err := sess.openResponse()
	if err != nil {
		return err
	}
	if f.open != nil {
		f.open(resp.GetOpen().GetParallel())
	}
	if err := stream.Send(resp); err != nil {
		return err
	}
	for step := 0; ; step++ {
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
		if b := resp.GetParallelBatch(); b != nil && f.batch != nil {
			f.batch(step, b)
		}
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
}

// TestRemoteMasksAndStateRefused: herd's client refuses an answer whose
// masks or global state break the protocol (a protocol error, never a
// panic or a wrong row), and herd's server answers an env's mask that
// does not fit its action space in-band (ENV_ERROR).
func TestRemoteMasksAndStateRefused(t *testing.T) {
	reset, step := 0, 1
	for _, c := range []struct {
		name  string
		query string
		open  func(*herdv1.ParallelSpaces)
		batch func(step int, b *herdv1.ParallelBatch)
		want  string
	}{
		{"state space not asked for", "", func(p *herdv1.ParallelSpaces) {
			p.StateSpace = &herdv1.Space{Kind: &herdv1.Space_Box{Box: &herdv1.Box{Low: []float32{0}, High: []float32{1}}}}
		}, nil, "did not ask for"},
		{"state space not a Box", "&state=true", func(p *herdv1.ParallelSpaces) {
			p.StateSpace = &herdv1.Space{Kind: &herdv1.Space_Discrete{Discrete: &herdv1.Discrete{N: 3}}}
		}, nil, "not a Box"},
		{"short mask", "&action_mask=true", nil, func(k int, b *herdv1.ParallelBatch) {
			b.Envs[0].Infos["runner"] = &herdv1.AgentInfo{ActionMask: []bool{true}}
		}, "action mask of 1 values"},
		{"info of an agent with no transition", "", nil, func(k int, b *herdv1.ParallelBatch) {
			if k == step {
				b.Envs[0].Infos["nobody"] = &herdv1.AgentInfo{}
			}
		}, `info of agent "nobody"`},
		{"reset infos without an autoreset", "", nil, func(k int, b *herdv1.ParallelBatch) {
			b.Envs[0].ResetInfos = map[string]*herdv1.AgentInfo{"runner": {ActionMask: []bool{true, true, true}}}
		}, "reset infos without an autoreset"},
		{"long state", "&state=true", nil, func(k int, b *herdv1.ParallelBatch) {
			b.Envs[0].State = append(b.Envs[0].State, 1)
		}, "global state of 9 values"},
		{"state not asked for", "", nil, func(k int, b *herdv1.ParallelBatch) {
			if k == reset {
				b.Envs[0].State = []float32{1}
			}
		}, "global state of 1 values"},
		{"final state without the episode's end", "&state=true", nil, func(k int, b *herdv1.ParallelBatch) {
			b.Envs[0].FinalState = make([]float32, 8)
		}, "final state of 8"},
	} {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			lis, err := service.Listen("127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			g := grpc.NewServer()
			herdv1.RegisterEnvServiceServer(g, &tamperServer{s: New(Config{ParallelEnvs: maskedWalkEnvs}), open: c.open, batch: c.batch})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- service.Serve(ctx, g, lis, time.Second) }()
			defer func() { cancel(); <-done }()
			v, err := envs().MakeVector("grpc://"+lis.Addr().String()+"/MaskedWalk?timeout=10s"+c.query, 3, env.Sync)
			if err == nil {
				defer v.Close()
				if _, err = v.Reset(1); err == nil {
					_, err = v.Step([]float32{1, 1, 1})
				}
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("%v; want an error with %q", err, c.want)
			}
		})
	}

	bad := map[string]func() (env.Parallel, error){"BadMask": func() (env.Parallel, error) {
		w, _ := newMaskedWalk()
		return badMask{w.(maskedWalk)}, nil
	}}
	addr, _ := startServerWith(t, nil, 0, Config{ParallelEnvs: bad})
	rp, err := envs().MakeParallel("grpc://" + addr + "/BadMask")
	if err != nil {
		t.Fatal(err)
	}
	defer rp.Close()
	if _, _, err := rp.Reset(1); err == nil || !strings.Contains(err.Error(), "action mask of 2 values") || status.Code(errors.Unwrap(err)) != codes.Internal {
		t.Fatalf("reset of an env with a short mask: %v, want an in-band ENV_ERROR", err)
	}
}

// badMask is MaskedWalk with masks one action short.
type badMask struct{ maskedWalk }

func (w badMask) Reset(seed int64) (map[string][]float32, map[string]env.Info, error) {
	obs, infos, err := w.maskedWalk.Reset(seed)
	for a, in := range infos {
		infos[a] = env.Info{ActionMask: in.ActionMask[:2]}
	}
	return obs, infos, err
}
