package replaysvc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"herd/internal/pyproc"
	"herd/internal/testcert"
	herdv1 "herd/proto/herd/v1"
	"herd/replay/persist"
	"herd/service"
)

type testServer struct {
	addr  string
	g     *grpc.Server
	store *persist.Store
}

// startReplay serves a hybrid store in a temporary directory with a
// prioritized sampler "per" (field "priority") and a uniform one, on a
// loopback port, until the test ends.
func startReplay(t *testing.T, maxMsg int) *testServer {
	t.Helper()
	dir := t.TempDir()
	samplers := []persist.Sampler{persist.NewPrioritized("per", "priority", 1), persist.NewUniform("uniform")}
	opts := persist.Options{Mode: persist.Hybrid, Dir: filepath.Join(dir, "store"), CacheMB: 1, Seed: 3, Samplers: samplers,
		MaxValueBytes: 64 << 10, SnapshotURL: "file://" + filepath.ToSlash(filepath.Join(dir, "snaps")) + "?create_dir=1", SnapshotEvery: -1}
	store, err := persist.Open(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Config{Store: store, Samplers: samplers, Mode: persist.Hybrid, MaxValueBytes: opts.MaxValueBytes, MaxBatch: 1000})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := service.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(service.ServerOptions(nil, maxMsg)...)
	srv.Register(g)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- service.Serve(ctx, g, lis, time.Second) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		if err := store.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return &testServer{addr: lis.Addr().String(), g: g, store: store}
}

func dial(t *testing.T, addr string, timeout time.Duration) *Client {
	t.Helper()
	c, err := Dial(addr, ClientOptions{Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func value(i, n int) []byte { return bytes.Repeat([]byte{byte(i)}, n) }

// TestPushGetSampleUpdateSnapshot drives every call of the Go client.
func TestPushGetSampleUpdateSnapshot(t *testing.T) {
	ts := startReplay(t, 0)
	c := dial(t, ts.addr, 10*time.Second)
	ctx := context.Background()
	var recs []Record
	for i := range 50 {
		recs = append(recs, Record{Key: fmt.Sprintf("k%02d", i), Value: value(i, 1000), Fields: map[string]float64{"priority": 1}})
	}
	if err := c.Push(ctx, recs); err != nil {
		t.Fatal(err)
	}
	got, err := c.Get(ctx, []string{"k03", "k49"}, true)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got[0].Value, value(3, 1000)) || got[1].Fields["priority"] != 1 || got[1].Key != "k49" {
		t.Fatalf("get: %+v", got[1])
	}
	for _, sampler := range []string{"", "per", "uniform"} {
		s, err := c.Sample(ctx, 100, sampler)
		if err != nil || len(s) != 100 {
			t.Fatalf("sample %q: %d records, %v", sampler, len(s), err)
		}
		for _, r := range s {
			var i int
			fmt.Sscanf(r.Key, "k%d", &i)
			if !bytes.Equal(r.Value, value(i, 1000)) {
				t.Fatalf("sample %q: %s has the wrong value", sampler, r.Key)
			}
		}
	}
	keys := make([]string, 50)
	prios := make([]float64, 50)
	for i := range keys {
		keys[i], prios[i] = recs[i].Key, 1e-9
	}
	prios[17] = 1e9
	if err := c.UpdatePriorities(ctx, "priority", keys, prios); err != nil {
		t.Fatal(err)
	}
	s, err := c.Sample(ctx, 200, "per")
	if err != nil {
		t.Fatal(err)
	}
	hot := 0
	for _, r := range s {
		if r.Key == "k17" {
			hot++
		}
	}
	if hot < 195 {
		t.Fatalf("after raising k17's priority it was drawn %d of 200 times", hot)
	}
	if got, _ := c.Get(ctx, []string{"k17"}, true); got[0].Fields["priority"] != 1e9 || !bytes.Equal(got[0].Value, value(17, 1000)) {
		t.Fatalf("k17 after update: %+v", got[0].Fields)
	}
	snap, err := c.Snapshot(ctx)
	if err != nil || snap.GetLen() != 50 || snap.GetManifest() == "" {
		t.Fatalf("snapshot: %v %v", snap, err)
	}
	d, err := c.Describe(ctx)
	if err != nil || d.GetLen() != 50 || len(d.GetSamplers()) != 2 || d.GetSamplers()[0].GetFields()[0] != "priority" || d.GetMode() != "hybrid" {
		t.Fatalf("describe: %v %v", d, err)
	}
}

// TestBadInput: each bad request gets its status, nothing of a rejected
// batch is written, and the server keeps serving.
func TestBadInput(t *testing.T) {
	ts := startReplay(t, 1<<20)
	c := dial(t, ts.addr, 10*time.Second)
	ctx := context.Background()
	ok := Record{Key: "a", Value: []byte("x"), Fields: map[string]float64{"priority": 1}}
	if err := c.Push(ctx, []Record{ok}); err != nil {
		t.Fatal(err)
	}
	conn, err := service.Dial(ts.addr, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	raw := herdv1.NewReplayServiceClient(conn)
	many := make([]string, 1001)
	for i := range many {
		many[i] = "a"
	}
	cases := []struct {
		name string
		err  error
		want codes.Code
	}{
		{"wrong version", func() error {
			_, err := raw.Sample(ctx, &herdv1.SampleRequest{ProtocolVersion: 2, N: 1})
			return err
		}(), codes.FailedPrecondition},
		{"no version", func() error {
			_, err := raw.Push(ctx, &herdv1.PushRequest{Records: []*herdv1.Record{{Key: "b"}}})
			return err
		}(), codes.FailedPrecondition},
		{"empty push", c.Push(ctx, nil), codes.InvalidArgument},
		{"empty key", c.Push(ctx, []Record{{Key: "", Fields: ok.Fields}}), codes.InvalidArgument},
		{"missing priority", c.Push(ctx, []Record{{Key: "b", Value: []byte("y")}}), codes.InvalidArgument},
		{"negative priority", c.Push(ctx, []Record{{Key: "b", Fields: map[string]float64{"priority": -1}}}), codes.InvalidArgument},
		{"value too large", c.Push(ctx, []Record{{Key: "b", Fields: ok.Fields}, {Key: "c", Value: make([]byte, 65<<10), Fields: ok.Fields}}), codes.InvalidArgument},
		{"oversized message", c.Push(ctx, []Record{{Key: "b", Value: make([]byte, 2<<20), Fields: ok.Fields}}), codes.ResourceExhausted},
		{"batch too large", func() error { _, err := c.Get(ctx, many, false); return err }(), codes.InvalidArgument},
		{"missing key", func() error { _, err := c.Get(ctx, []string{"a", "zz"}, false); return err }(), codes.NotFound},
		{"unknown sampler", func() error { _, err := c.Sample(ctx, 1, "nope"); return err }(), codes.InvalidArgument},
		{"zero sample", func() error {
			_, err := raw.Sample(ctx, &herdv1.SampleRequest{ProtocolVersion: 1, N: 0})
			return err
		}(), codes.InvalidArgument},
		{"update lengths", c.UpdatePriorities(ctx, "priority", []string{"a"}, nil), codes.InvalidArgument},
		{"update missing key", c.UpdatePriorities(ctx, "priority", []string{"zz"}, []float64{1}), codes.NotFound},
		{"update negative priority", c.UpdatePriorities(ctx, "priority", []string{"a"}, []float64{-1}), codes.InvalidArgument},
	}
	for _, tc := range cases {
		if status.Code(tc.err) != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, tc.err, tc.want)
		}
	}
	if n := ts.store.Len(); n != 1 {
		t.Fatalf("rejected batches wrote records: store holds %d", n)
	}
	if got, err := c.Get(ctx, []string{"a"}, true); err != nil || got[0].Fields["priority"] != 1 {
		t.Fatalf("after bad input: %v %v", got, err)
	}
}

// TestConcurrentClients: 8 clients push and sample at once; every record
// pushed is there afterwards with its value.
func TestConcurrentClients(t *testing.T) {
	ts := startReplay(t, 0)
	const clients, batches, per = 8, 10, 20
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for w := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := Dial(ts.addr, ClientOptions{Timeout: 20 * time.Second})
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			ctx := context.Background()
			for b := range batches {
				recs := make([]Record, per)
				for i := range recs {
					recs[i] = Record{Key: fmt.Sprintf("w%d-b%d-%d", w, b, i), Value: value(w, 512+i), Fields: map[string]float64{"priority": float64(i + 1)}}
				}
				if err := c.Push(ctx, recs); err != nil {
					errs <- err
					return
				}
				if _, err := c.Sample(ctx, 32, "per"); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := ts.store.Len(); n != clients*batches*per {
		t.Fatalf("store holds %d records, want %d", n, clients*batches*per)
	}
	c := dial(t, ts.addr, 10*time.Second)
	got, err := c.Get(context.Background(), []string{"w7-b9-19", "w0-b0-0"}, false)
	if err != nil || !bytes.Equal(got[0].Value, value(7, 531)) || !bytes.Equal(got[1].Value, value(0, 512)) {
		t.Fatalf("get after concurrent pushes: %v", err)
	}
}

// TestServerGone: a client whose server stopped gets an error within its
// deadline.
func TestServerGone(t *testing.T) {
	ts := startReplay(t, 0)
	c := dial(t, ts.addr, 2*time.Second)
	if err := c.Push(context.Background(), []Record{{Key: "a", Fields: map[string]float64{"priority": 1}}}); err != nil {
		t.Fatal(err)
	}
	ts.g.Stop()
	start := time.Now()
	_, err := c.Sample(context.Background(), 1, "")
	if err == nil || time.Since(start) > 3*time.Second {
		t.Fatalf("sample on a stopped server: %v after %v", err, time.Since(start))
	}
	if status.Code(err) == codes.OK {
		t.Fatalf("no gRPC status in %v", err)
	}
}

// TestPythonClient: a real Python process pushes, gets, samples and
// updates priorities through herd_env.replay (python/tests/
// replay_client_check.py checks its side); then the Go client reads what
// Python wrote.
func TestPythonClient(t *testing.T) {
	ts := startReplay(t, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := pyproc.Command(t, ctx, "tests/replay_client_check.py", ts.addr)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python client: %v\n%s", err, stderr.String())
	}
	var res struct{ Pushed, Hot, Len int }
	if err := json.Unmarshal(out, &res); err != nil || res.Pushed != 64 || res.Len != 64 {
		t.Fatalf("python client said %q (%v)", out, err)
	}
	c := dial(t, ts.addr, 10*time.Second)
	got, err := c.Get(context.Background(), []string{"py-010", "py-063"}, true)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got[0].Value, value(10, 110)) || got[1].Fields["priority"] != 1e9 {
		t.Fatalf("records written by Python: %q %v", got[0].Value[:4], got[1].Fields)
	}
}

// TestMutualTLS: a replay server that requires client certificates serves
// a client with one and refuses a client without.
func TestMutualTLS(t *testing.T) {
	ca := testcert.NewCA(t, "herd-test")
	scert, skey := ca.Leaf("server", true)
	ccert, ckey := ca.Leaf("client", false)
	conf, err := service.TLSFiles{Cert: scert, Key: skey, CA: ca.File}.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	store, err := persist.Open(context.Background(), persist.Options{Mode: persist.Memory})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	srv, err := New(Config{Store: store, Samplers: []persist.Sampler{persist.NewUniform("uniform")}})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := service.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(service.ServerOptions(conf, 0)...)
	srv.Register(g)
	go g.Serve(lis)
	defer g.Stop()
	good, err := Dial(lis.Addr().String(), ClientOptions{TLS: &service.TLSFiles{CA: ca.File, Cert: ccert, Key: ckey}, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer good.Close()
	if err := good.Push(context.Background(), []Record{{Key: "a"}}); err != nil {
		t.Fatalf("client with a certificate: %v", err)
	}
	bad, err := Dial(lis.Addr().String(), ClientOptions{TLS: &service.TLSFiles{CA: ca.File}, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	if err := bad.Push(context.Background(), []Record{{Key: "b"}}); err == nil {
		t.Fatal("client without a certificate was served")
	}
}
