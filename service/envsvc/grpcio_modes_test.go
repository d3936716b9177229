package envsvc

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"herd/internal/pyproc"
	herdv1 "herd/proto/herd/v1"
)

// BenchmarkGrpcioModes measures grpcio's own floor per step message with
// python/tests/grpc_modes.py answering canned bytes: a unary call per step
// against a message pair on one bidirectional stream (what EnvService's
// Session does), on grpcio's synchronous server and on grpc.aio. Besides
// ns/op (the round trip) it reports the server process's CPU time per call
// (server-µs/op, from /proc; 10 ms ticks, so use -benchtime 3000x or more),
// which on a busy machine is the figure that stays put.
func BenchmarkGrpcioModes(b *testing.B) {
	for _, mode := range []string{"sync", "aio"} {
		p := pyproc.Start(b, "grpc_modes", "--mode", mode)
		cc, err := grpc.NewClient(p.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			b.Fatal(err)
		}
		methods := []string{"Unary", "Stream"}
		if mode == "aio" {
			methods = append(methods, "StreamRW")
		}
		for _, m := range methods {
			b.Run(mode+"/"+m, func(b *testing.B) {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
				defer cancel()
				req := &herdv1.EnvRequest{Msg: &herdv1.EnvRequest_Step{Step: &herdv1.StepRequest{Actions: []float32{1}}}}
				call, err := floorCaller(ctx, cc, m)
				if err != nil {
					b.Fatal(err)
				}
				resp := new(herdv1.EnvResponse)
				for i := 0; i < 100; i++ { // connection and stream warm
					if err := call(req, resp); err != nil {
						b.Fatal(err)
					}
				}
				cpu0 := procCPU(b, p.Cmd.Process.Pid)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if err := call(req, resp); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				if len(resp.GetBatch().GetObs()) != 4 {
					b.Fatalf("answer %v, want the canned 1-env step", resp)
				}
				b.ReportMetric(float64((procCPU(b, p.Cmd.Process.Pid)-cpu0).Microseconds())/float64(b.N), "server-µs/op")
			})
		}
		cc.Close()
	}
}

// floorCaller returns a function making one request/answer exchange on
// /floor.F/METHOD: a unary call, or a message pair on one stream.
func floorCaller(ctx context.Context, cc *grpc.ClientConn, method string) (func(req *herdv1.EnvRequest, resp *herdv1.EnvResponse) error, error) {
	full := "/floor.F/" + method
	if method == "Unary" {
		return func(req *herdv1.EnvRequest, resp *herdv1.EnvResponse) error {
			return cc.Invoke(ctx, full, req, resp)
		}, nil
	}
	st, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, full)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", full, err)
	}
	return func(req *herdv1.EnvRequest, resp *herdv1.EnvResponse) error {
		if err := st.SendMsg(req); err != nil {
			return fmt.Errorf("send: %w", err)
		}
		if err := st.RecvMsg(resp); err != nil {
			return fmt.Errorf("recv: %w", err)
		}
		return nil
	}, nil
}
