package transport

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	herdv1 "herd/proto/herd/v1"
)

func mustMarshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Malformed and wrong-version messages on every subject are counted,
// logged and dropped; the services go on working.
func TestNATSMalformed(t *testing.T) {
	srv := startServer(t)
	ctx := ctxT(t, 30*time.Second)
	raw := natsTransport(t, srv.URL())
	nc := raw.Conn()
	garbage := []byte{0xff, 0xff, 0xff}
	wrongInfer := mustMarshal(t, &herdv1.InferRequest{Protocol: 99, Rows: 1, ObsDim: obsDim, Obs: make([]float32, obsDim)})

	t.Run("inference", func(t *testing.T) {
		run := runID(t)
		server, err := natsTransport(t, srv.URL()).Inference(ctx, run, inferOpt)
		if err != nil {
			t.Fatal(err)
		}
		serve(t, server, policyFn(3, nil, nil))
		shortObs := mustMarshal(t, &herdv1.InferRequest{Protocol: Protocol, Rows: 2, ObsDim: obsDim, Obs: make([]float32, obsDim)})
		for _, b := range [][]byte{garbage, wrongInfer, shortObs} {
			m, err := raw.request(ctx, "herd."+run+".infer", b) // waits for Serve to subscribe
			if err != nil {
				t.Fatal(err)
			}
			var rep herdv1.InferReply
			if err := decode(m.Data, &rep); err != nil || rep.Error == "" {
				t.Errorf("reply to a bad request: %v %q", err, rep.Error)
			}
		}
		if st := server.Stats(); st.Malformed != 2 || st.WrongProtocol != 1 {
			t.Errorf("server stats %+v, want 2 malformed, 1 wrong protocol", st)
		}
		client, err := natsTransport(t, srv.URL()).Inference(ctx, run, inferOpt)
		if err != nil {
			t.Fatal(err)
		}
		if err := infer(ctx, client, &InferRequest{}, 0, 2, 1); err != nil {
			t.Fatalf("a good request after bad ones: %v", err)
		}

		// A reply that does not decode fails that request only.
		fake := run + "_fake"
		sub, err := nc.Subscribe("herd."+fake+".infer", func(m *nats.Msg) { _ = m.Respond(garbage) })
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Unsubscribe()
		c2, err := natsTransport(t, srv.URL()).Inference(ctx, fake, inferOpt)
		if err != nil {
			t.Fatal(err)
		}
		if err := c2.Infer(ctx, &InferRequest{Rows: 1, Obs: make([]float32, obsDim)}); !errors.Is(err, ErrMalformed) {
			t.Errorf("garbage reply: %v, want ErrMalformed", err)
		}
		if st := c2.Stats(); st.Malformed != 1 {
			t.Errorf("client stats %+v", st)
		}
	})

	t.Run("samples", func(t *testing.T) {
		run := runID(t)
		learner, err := natsTransport(t, srv.URL()).Samples(ctx, run, Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer learner.Close()
		c0, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		_, _ = learner.Pull(c0) // join the learners
		cancel()
		wrong := mustMarshal(t, &herdv1.SamplePush{Protocol: 0, Sample: []byte{1}})
		empty := mustMarshal(t, &herdv1.SamplePush{Protocol: Protocol})
		for _, b := range [][]byte{garbage, wrong, empty} {
			m, err := nc.Request("herd."+run+".samples", b, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			var ack herdv1.SampleAck
			if err := decode(m.Data, &ack); err != nil || ack.Error == "" {
				t.Errorf("ack of a bad push: %v %q", err, ack.Error)
			}
		}
		if st := learner.Stats(); st.Malformed != 2 || st.WrongProtocol != 1 {
			t.Errorf("learner stats %+v, want 2 malformed, 1 wrong protocol", st)
		}
		pusher, err := natsTransport(t, srv.URL()).Samples(ctx, run, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := pusher.Push(ctx, SampleID{Slot: 0}, []byte("ok")); err != nil {
			t.Fatal(err)
		}
		if b, err := learner.Pull(ctx); err != nil || string(b) != "ok" {
			t.Fatalf("pull after bad pushes: %q %v", b, err)
		}
	})

	t.Run("actor calls", func(t *testing.T) {
		run := runID(t)
		server, err := natsTransport(t, srv.URL()).Calls(ctx, run, Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer server.Close()
		var runs atomic.Int32
		serveActor(t, server, "a", func(_ context.Context, _ uint64, b []byte) ([]byte, error) {
			runs.Add(1)
			return b, nil
		})
		wrong := mustMarshal(t, &herdv1.ActorCall{Protocol: 7, Seq: 1, Body: []byte("x")})
		for _, b := range [][]byte{garbage, wrong} {
			m, err := raw.request(ctx, "herd."+run+".actor.a", b) // waits for Serve to subscribe
			if err != nil {
				t.Fatal(err)
			}
			var rep herdv1.ActorReply
			if err := decode(m.Data, &rep); err != nil || rep.Error == "" {
				t.Errorf("reply to a bad call: %v %q", err, rep.Error)
			}
		}
		if st := server.Stats(); st.Malformed != 1 || st.WrongProtocol != 1 || runs.Load() != 0 {
			t.Errorf("server stats %+v after %d runs, want 1 malformed, 1 wrong protocol, no run", st, runs.Load())
		}
		client, err := natsTransport(t, srv.URL()).Calls(ctx, run, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if b, err := client.Call(ctx, "a", 1, []byte("ok")); err != nil || string(b) != "ok" {
			t.Fatalf("a good call after bad ones: %q %v", b, err)
		}

		// A reply that does not decode, or answers another call, fails
		// that call only.
		for i, reply := range [][]byte{garbage, mustMarshal(t, &herdv1.ActorReply{Protocol: Protocol, Seq: 9})} {
			sub, err := nc.Subscribe("herd."+run+".actor.fake"+strconv.Itoa(i), func(m *nats.Msg) { _ = m.Respond(reply) })
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Unsubscribe()
			if _, err := client.Call(ctx, "fake"+strconv.Itoa(i), 1, nil); !errors.Is(err, ErrMalformed) {
				t.Errorf("bad reply %d: %v, want ErrMalformed", i, err)
			}
		}
		if st := client.Stats(); st.Malformed != 2 {
			t.Errorf("client stats %+v", st)
		}
	})

	t.Run("params", func(t *testing.T) {
		run := runID(t)
		like := testParams(8)
		p, err := natsTransport(t, srv.URL()).Params(ctx, run, Options{Like: like})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		obs, err := raw.js.ObjectStore(ctx, "herd_"+run+"_params")
		if err != nil {
			t.Fatal(err)
		}
		good, err := version(4, like).Encode()
		if err != nil {
			t.Fatal(err)
		}
		other, err := version(4, testParams(10)).Encode()
		if err != nil {
			t.Fatal(err)
		}
		bad := [][]byte{
			garbage,
			mustMarshal(t, &herdv1.Params{Protocol: 99, WeightsVersion: 4, Safetensors: good}),
			mustMarshal(t, &herdv1.Params{Protocol: Protocol, WeightsVersion: 4, Safetensors: garbage}),
			mustMarshal(t, &herdv1.Params{Protocol: Protocol, WeightsVersion: 4, Safetensors: other}),
			mustMarshal(t, &herdv1.Params{Protocol: Protocol, WeightsVersion: 5, Safetensors: good}),
		}
		for i, b := range bad {
			if _, err := obs.PutBytes(ctx, paramsObject(4), b); err != nil {
				t.Fatal(err)
			}
			eventually(t, 5*time.Second, "bad object "+strconv.Itoa(i)+" counted", func() bool {
				st := p.Stats()
				return st.Malformed+st.WrongProtocol == uint64(i+1)
			})
		}
		if st := p.Stats(); st.WrongProtocol != 1 || p.Latest() != nil {
			t.Errorf("stats %+v, latest %v", st, p.Latest())
		}
		if _, err := obs.PutBytes(ctx, "junk", good); err != nil { // not a version's name
			t.Fatal(err)
		}
		eventually(t, 5*time.Second, "bad name counted", func() bool { return p.Stats().Malformed == 5 })
		if _, err := obs.PutBytes(ctx, paramsObject(4), mustMarshal(t, &herdv1.Params{Protocol: Protocol, WeightsVersion: 4, Safetensors: good})); err != nil {
			t.Fatal(err)
		}
		v, err := p.Wait(ctx, 4)
		if err != nil {
			t.Fatal(err)
		}
		sameVersion(t, v, version(4, like))
	})

	// A version pushed on the params subject is taken without any store
	// object; a push without a version header, or whose envelope names
	// another version than its header, is counted and dropped.
	t.Run("params push", func(t *testing.T) {
		run := runID(t)
		like := testParams(8)
		p, err := natsTransport(t, srv.URL()).Params(ctx, run, Options{Like: like})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		good, err := version(4, like).Encode()
		if err != nil {
			t.Fatal(err)
		}
		push := func(header string, b []byte) {
			t.Helper()
			m := &nats.Msg{Subject: "herd." + run + ".params", Data: b, Header: nats.Header{}}
			if header != "" {
				m.Header.Set(paramsVersionHeader, header)
			}
			if err := raw.nc.PublishMsg(m); err != nil {
				t.Fatal(err)
			}
		}
		envelope := mustMarshal(t, &herdv1.Params{Protocol: Protocol, WeightsVersion: 4, Safetensors: good})
		// One at a time: of the pushes queued at once only the newest is
		// decoded.
		for i, bad := range []struct {
			header string
			b      []byte
		}{{"", envelope}, {"x", envelope}, {"3", envelope}, {"4", garbage}} {
			push(bad.header, bad.b)
			eventually(t, 5*time.Second, "bad push "+strconv.Itoa(i)+" counted", func() bool { return p.Stats().Malformed == uint64(i+1) })
		}
		push("4", envelope)
		v, err := p.Wait(ctx, 4)
		if err != nil {
			t.Fatal(err)
		}
		sameVersion(t, v, version(4, like))
		if st := p.Stats(); st.Malformed != 4 || st.FetchFailed != 0 {
			t.Errorf("stats %+v", st)
		}
	})

	t.Run("membership", func(t *testing.T) {
		run := runID(t)
		m, err := natsTransport(t, srv.URL()).Membership(ctx, run, Options{TTL: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		if _, err := raw.js.Publish(ctx, "$KV.herd_"+run+"_members.junk", garbage, jetstream.WithMsgTTL(time.Second)); err != nil {
			t.Fatal(err)
		}
		l, err := m.Register(ctx, "w", []byte("x"))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if got := names(t, m); len(got) != 1 || got[0] != "w=x" {
			t.Errorf("members %v", got)
		}
		if st := m.Stats(); st.Malformed != 1 {
			t.Errorf("stats %+v", st)
		}
	})
}

// A NATS server restart (same port and store) interrupts nothing for good:
// clients reconnect, policy workers resubscribe and the weights survive in
// JetStream.
func TestNATSServerRestart(t *testing.T) {
	srv, restart := restartableServer(t)
	defer func() { srv.Shutdown() }()
	ctx := ctxT(t, 40*time.Second)
	like := testParams(8)
	run := runID(t)
	a, b := natsTransport(t, srv.URL()), natsTransport(t, srv.URL())
	pa, err := a.Params(ctx, run, Options{Like: like})
	if err != nil {
		t.Fatal(err)
	}
	defer pa.Close()
	if err := pa.Publish(ctx, version(1, like)); err != nil {
		t.Fatal(err)
	}
	server, err := a.Inference(ctx, run, inferOpt)
	if err != nil {
		t.Fatal(err)
	}
	serve(t, server, policyFn(1, nil, nil))
	client, err := b.Inference(ctx, run, inferOpt)
	if err != nil {
		t.Fatal(err)
	}
	if err := infer(ctx, client, &InferRequest{}, 0, 1, 0); err != nil {
		t.Fatal(err)
	}

	srv.Shutdown()
	srv = restart()
	t0 := time.Now()
	for { // a role retries a bounded wait
		c, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		err := infer(c, client, &InferRequest{}, 0, 1, 0)
		cancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no answer after the restart: %v", err)
		}
	}
	t.Logf("inference answered again %v after the restart", time.Since(t0))
	pb, err := b.Params(ctx, run, Options{Like: like})
	if err != nil {
		t.Fatal(err)
	}
	defer pb.Close()
	v, err := pb.Wait(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	sameVersion(t, v, version(1, like))
}

// A run's end mark: absent until EndRun, then the first outcome stored
// stays (a second EndRun, the controller's after the learner's, keeps it).
func TestNATSRunEnded(t *testing.T) {
	srv := startServer(t)
	ctx := ctxT(t, 30*time.Second)
	n := natsTransport(t, srv.URL())
	run := runID(t)
	if why, ended, err := n.RunEnded(ctx, run); err != nil || ended {
		t.Fatalf("before EndRun: %q, %v, %v; want not ended", why, ended, err)
	}
	if err := n.EndRun(ctx, run, "completed"); err != nil {
		t.Fatal(err)
	}
	if err := n.EndRun(ctx, run, "ended by the controller"); err != nil {
		t.Fatal(err)
	}
	if why, ended, err := n.RunEnded(ctx, run); err != nil || !ended || why != "completed" {
		t.Fatalf("after EndRun: %q, %v, %v; want completed", why, ended, err)
	}
}

// Gone fires for a member whose key vanished without a watch update (the
// bucket's stream purged here; in production, a removal the watch missed
// while this process was cut off from the servers): the key is also
// looked up once per TTL.
func TestNATSGoneWithoutWatchUpdate(t *testing.T) {
	srv := startServer(t)
	ctx := ctxT(t, 30*time.Second)
	n := natsTransport(t, srv.URL())
	run := runID(t)
	mem, err := n.Membership(ctx, run, Options{TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	js, err := jetstream.New(n.Conn())
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, "herd_"+run+"_members")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "controller", []byte("x")); err != nil {
		t.Fatal(err)
	}
	gone, err := mem.Gone(ctx, "controller")
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, "KV_herd_"+run+"_members")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-gone:
	case <-ctx.Done():
		t.Fatal("Gone did not fire for a member whose key vanished without a watch update")
	}
}

// A publisher keeps each version in the store until it has been superseded
// for fetchTimeout (so a reader's download in progress keeps its object),
// at most paramsKeepMax, at least the newest two.
func TestParamsRetire(t *testing.T) {
	srv := startServer(t)
	ctx := ctxT(t, 30*time.Second)
	run := runID(t)
	like := testParams(4)
	ps, err := natsTransport(t, srv.URL()).Params(ctx, run, Options{Like: like})
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close()
	p := ps.(*natsParams)
	stored := func() []uint64 {
		t.Helper()
		infos, err := p.obs.List(ctx)
		if err != nil && !errors.Is(err, jetstream.ErrNoObjectsFound) {
			t.Fatal(err)
		}
		var ns []uint64
		for _, info := range infos {
			if n, ok := paramsVersion(info.Name); ok && !info.Deleted {
				ns = append(ns, n)
			}
		}
		slices.Sort(ns)
		return ns
	}
	put := func(n uint64) {
		t.Helper()
		b, err := encode(&herdv1.Params{Protocol: Protocol, WeightsVersion: n})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.obs.PutBytes(ctx, paramsObject(n), b); err != nil {
			t.Fatal(err)
		}
	}
	t0 := time.Unix(1000, 0)
	// 5 versions 10 ms apart: all superseded for less than fetchTimeout.
	for n := range uint64(5) {
		put(n)
		p.retire(ctx, n, t0.Add(time.Duration(n)*10*time.Millisecond))
	}
	if got := stored(); !slices.Equal(got, []uint64{0, 1, 2, 3, 4}) {
		t.Fatalf("after 5 quick versions the store holds %v, want all", got)
	}
	// Version 5 comes fetchTimeout later: 0…3 were superseded longer ago
	// than that and go; 4 was superseded just now and stays.
	put(5)
	p.retire(ctx, 5, t0.Add(40*time.Millisecond+fetchTimeout+time.Millisecond))
	if got := stored(); !slices.Equal(got, []uint64{4, 5}) {
		t.Fatalf("after a pause the store holds %v, want [4 5]", got)
	}
	// However fast the versions come, at most paramsKeepMax stay.
	at := t0.Add(time.Hour)
	for n := uint64(6); n < 6+2*paramsKeepMax; n++ {
		put(n)
		p.retire(ctx, n, at)
	}
	if got := stored(); len(got) != paramsKeepMax || got[len(got)-1] != 5+2*paramsKeepMax {
		t.Fatalf("after %d versions at once the store holds %d (%v), want the newest %d", 2*paramsKeepMax, len(got), got, paramsKeepMax)
	}
}

// Pushed versions reach the store late but surely: the first version and
// every storeEvery-th are put at once, the ones between only when no newer
// one follows within storeDelay, so a reader joining after a pause finds
// the newest version there.
func TestParamsStoreTrails(t *testing.T) {
	srv := startServer(t)
	ctx := ctxT(t, 30*time.Second)
	run := runID(t)
	like := testParams(4)
	tr := natsTransport(t, srv.URL())
	ps, err := tr.Params(ctx, run, Options{Like: like})
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close()
	p := ps.(*natsParams)
	has := func(n uint64) bool {
		_, err := p.obs.GetInfo(ctx, paramsObject(n))
		return err == nil
	}
	for n := uint64(1); n <= storeEvery+3; n++ {
		if err := p.Publish(ctx, version(n, like)); err != nil {
			t.Fatal(err)
		}
	}
	if !has(1) || !has(1+storeEvery) {
		t.Errorf("versions 1 and %d not put at once", 1+storeEvery)
	}
	eventually(t, 5*time.Second, "the newest version stored", func() bool { return has(storeEvery + 3) })
	late, err := tr.Params(ctx, run, Options{Like: like})
	if err != nil {
		t.Fatal(err)
	}
	defer late.Close()
	v, err := late.Wait(ctx, storeEvery+3)
	if err != nil {
		t.Fatal(err)
	}
	sameVersion(t, v, version(storeEvery+3, like))
}
