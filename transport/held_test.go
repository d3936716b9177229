package transport

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	herdv1 "herd/proto/herd/v1"
)

// A stalled learner with 8 pushers of 1 MB samples, each sent three times
// (its re-sends), holds at most Options.HeldBytes of them: a re-send of a
// push it holds takes no bytes and moves the ack to the re-send, pushes
// beyond the bound are refused unacknowledged (Shed) and re-sent, and
// once the learner pulls, every sample is learned exactly once.
func TestStalledLearnerHoldsBoundedBytes(t *testing.T) {
	srv, err := StartServer(ServerOptions{MaxPayload: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const size, pushers, bound = 1 << 20, 8, 3<<20 + 1<<10
	ss, err := natsTransport(t, srv.URL()).Samples(ctx, "held", Options{Capacity: 1, HeldBytes: bound})
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	learner := ss.(*natsSamples)
	if err := learner.join(); err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	data := make([][]byte, pushers)
	for k := range data {
		b := make([]byte, size)
		b[0] = byte(k)
		data[k] = mustMarshal(t, &herdv1.SamplePush{Protocol: Protocol, Worker: int32(k), Sample: b})
	}
	// send pushes k's sample as a request whose ack arrives on its own inbox.
	send := func(k int) *nats.Subscription {
		inbox := nc.NewInbox()
		sub, err := nc.SubscribeSync(inbox)
		if err != nil {
			t.Fatal(err)
		}
		m := &nats.Msg{Subject: learner.subj, Reply: inbox, Data: data[k], Header: nats.Header{}}
		m.Header.Set(sampleIDHeader, SampleID{Slot: k, Incarnation: 1, Seq: 1}.String())
		if err := nc.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
		return sub
	}
	latest := make([]*nats.Subscription, pushers)
	for range 3 {
		for k := range pushers {
			latest[k] = send(k)
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
		learner.heldMu.Lock()
		held := learner.heldBytes
		learner.heldMu.Unlock()
		if held > bound {
			t.Fatalf("the stalled learner holds %d bytes of pushes, over the bound %d", held, bound)
		}
	}
	st := learner.Stats()
	if st.Shed == 0 || st.Duplicates == 0 {
		t.Errorf("stats %+v: want re-sends absorbed (Duplicates) and pushes shed at the bound", st)
	}
	// The learner resumes: the pushers whose latest request has no ack
	// send again (their re-send after pushResend), until every sample is
	// in; each is learned once.
	learned := make([]int, pushers)
	acked := make([]bool, pushers)
	for got := 0; got < pushers; {
		pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
		b, err := ss.Pull(pctx)
		pcancel()
		if err == nil {
			learned[b[0]]++
			got++
			continue
		}
		if ctx.Err() != nil {
			t.Fatalf("learned %v before the deadline", learned)
		}
		for k := range pushers {
			if !acked[k] {
				if _, err := latest[k].NextMsg(10 * time.Millisecond); err == nil {
					acked[k] = true
				} else {
					latest[k] = send(k)
				}
			}
		}
	}
	for k, n := range learned {
		if n != 1 {
			t.Errorf("sample %d learned %d times, want once", k, n)
		}
	}
	for k := range pushers {
		if !acked[k] {
			if _, err := latest[k].NextMsg(2 * time.Second); err != nil {
				t.Errorf("pusher %d: its latest request has no ack: %v", k, err)
			}
		}
	}
}
