package transport

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// The server's per-connection counters are payload plus header bytes, both
// directions, for open and closed connections alike, and agree with the
// clients' own counters; SumTraffic attributes them by connection name.
func TestServerTraffic(t *testing.T) {
	srv, err := StartServer(ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	dial := func(name string) *nats.Conn {
		opts := []nats.Option{}
		if name != "" {
			opts = append(opts, nats.Name(name))
		}
		nc, err := nats.Connect(srv.URL(), opts...)
		if err != nil {
			t.Fatal(err)
		}
		return nc
	}
	a, b, other := dial(ConnName("env-0", KindInference)), dial(ConnName("policy-0", KindSamples)), dial("")
	defer other.Close()
	got := make(chan int, 16)
	if _, err := b.Subscribe("x", func(m *nats.Msg) { got <- len(m.Data) }); err != nil {
		t.Fatal(err)
	}
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if err := a.Publish("x", make([]byte, 100)); err != nil {
			t.Fatal(err)
		}
	}
	m := nats.NewMsg("x")
	m.Data = make([]byte, 50)
	m.Header.Set("K", "v")
	if err := a.PublishMsg(m); err != nil {
		t.Fatal(err)
	}
	if err := other.Publish("nobody", make([]byte, 7)); err != nil {
		t.Fatal(err)
	}
	for range 11 {
		select {
		case <-got:
		case <-time.After(5 * time.Second):
			t.Fatal("messages not delivered within 5 s")
		}
	}
	if err := other.Flush(); err != nil {
		t.Fatal(err)
	}
	as, bs := a.Stats(), b.Stats()
	a.Close() // a closed connection keeps its counters
	sent := as.OutBytes
	if hdr := uint64(1000 + 50); sent <= hdr {
		t.Fatalf("client a sent %d bytes, want payloads %d plus the header", sent, hdr)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conns, err := srv.SettledTraffic(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]ConnTraffic{}
	for _, c := range conns {
		byName[c.Name] = c
	}
	ca, cb := byName[ConnName("env-0", KindInference)], byName[ConnName("policy-0", KindSamples)]
	if ca.InBytes != sent || ca.InMsgs != 11 || ca.OutBytes != 0 {
		t.Errorf("closed conn a: server counted in %d B / %d msgs, out %d B; client sent %d B in 11 msgs", ca.InBytes, ca.InMsgs, ca.OutBytes, sent)
	}
	if cb.OutBytes != sent || cb.OutBytes != bs.InBytes || cb.OutMsgs != 11 {
		t.Errorf("conn b: server sent %d B / %d msgs, client b received %d B; want %d B in 11 msgs", cb.OutBytes, cb.OutMsgs, bs.InBytes, sent)
	}
	w := SumTraffic(conns)
	if w.ByKind[KindInference] != sent || w.ByKind[KindSamples] != sent || w.ByKind[KindParams] != 0 {
		t.Errorf("by kind %v, want inference and samples %d each", w.ByKind, sent)
	}
	if w.Total != 2*sent+7 {
		t.Errorf("total %d, want the kinds' %d plus the unnamed connection's 7", w.Total, 2*sent)
	}
	if KindOf("herd env-0 inference") != KindInference || KindOf("herd launch") != "" || KindOf("params") != "" {
		t.Error("KindOf misreads connection names")
	}
}
