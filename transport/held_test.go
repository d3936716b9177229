package transport

import (
	"context"
	"encoding/binary"
	"sync"
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

// BenchmarkStalledLearner: 8 pushers of 1 MiB samples push to a learner
// that stalls for 20 s (it pulls nothing), then drains. Reported: the most
// bytes of pushes the learner held while stalled, the re-sends absorbed
// (duplicates), the pushes shed at the bound, and the samples learned
// twice (must be 0). The fault matrix's stalled-learner row:
//
//	go test ./transport -run '^$' -bench StalledLearner -benchtime 1x
func BenchmarkStalledLearner(b *testing.B) {
	for _, held := range []int{0, 2 << 20} {
		name := "held_bytes=default"
		if held > 0 {
			name = "held_bytes=2MiB"
		}
		b.Run(name, func(b *testing.B) { benchStalledLearner(b, held) })
	}
}

func benchStalledLearner(b *testing.B, held int) {
	const size, pushers, stall = 1 << 20, 8, 20 * time.Second
	for range b.N {
		srv, err := StartServer(ServerOptions{MaxPayload: 8 << 20})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		n := natsTransport(b, srv.URL())
		ss, err := n.Samples(ctx, "stall", Options{HeldBytes: held})
		if err != nil {
			b.Fatal(err)
		}
		learner := ss.(*natsSamples)
		if err := learner.join(); err != nil {
			b.Fatal(err)
		}
		pusher, err := natsTransport(b, srv.URL()).Samples(ctx, "stall", Options{})
		if err != nil {
			b.Fatal(err)
		}
		var wg sync.WaitGroup
		for k := range pushers {
			wg.Go(func() {
				for seq := uint64(1); ctx.Err() == nil; seq++ {
					s := make([]byte, size)
					s[0] = byte(k)
					binary.LittleEndian.PutUint64(s[1:], seq)
					if err := pusher.Push(ctx, SampleID{Slot: k, Incarnation: 1, Seq: seq}, s); err != nil {
						return
					}
				}
			})
		}
		heldMax := 0
		for end := time.Now().Add(stall); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
			learner.heldMu.Lock()
			heldMax = max(heldMax, learner.heldBytes+len(learner.q)*size)
			learner.heldMu.Unlock()
		}
		seen := map[[9]byte]bool{}
		twice := 0
		for dctx, dcancel := context.WithTimeout(ctx, 3*time.Second); ; {
			s, err := ss.Pull(dctx)
			if err != nil {
				dcancel()
				break
			}
			key := [9]byte(s[:9])
			if seen[key] {
				twice++
			}
			seen[key] = true
		}
		cancel()
		wg.Wait()
		st := learner.Stats()
		b.ReportMetric(float64(heldMax)/(1<<20), "MiB-held-max")
		b.ReportMetric(float64(st.Duplicates), "duplicates")
		b.ReportMetric(float64(st.Shed), "shed")
		b.ReportMetric(float64(len(seen)), "learned")
		b.ReportMetric(float64(twice), "learned-twice")
		_ = pusher.Close()
		_ = ss.Close()
		srv.Shutdown()
	}
}
