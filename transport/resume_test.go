package transport

import (
	"context"
	"testing"
	"time"
)

// TestDedupWindowAcrossLearners: a learner that restores another's dedup
// window (its checkpoint) acknowledges a retry of a sample the window
// holds without queueing it (Stats.Duplicates), queues the next, and
// counts the numbers a pusher skipped past the window (samples the first
// learner acknowledged after its checkpoint) in Stats.Lost, once.
func TestDedupWindowAcrossLearners(t *testing.T) {
	srv := startServer(t)
	ctx := ctxT(t, 30*time.Second)
	run := runID(t)
	opt := Options{Capacity: NoQueue}
	first, err := natsTransport(t, srv.URL()).Samples(ctx, run, opt)
	if err != nil {
		t.Fatal(err)
	}
	pusher, err := natsTransport(t, srv.URL()).Samples(ctx, run, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer pusher.Close()
	push := func(id SampleID) { // on goroutines of its own: Errorf
		if err := pusher.Push(ctx, id, []byte{byte(id.Seq)}); err != nil {
			t.Errorf("push %v: %v", id, err)
		}
	}
	pull := func(s SampleStream, want byte) {
		t.Helper()
		b, err := s.Pull(ctx)
		if err != nil || len(b) != 1 || b[0] != want {
			t.Fatalf("pull: %v %v, want [%d]", b, err, want)
		}
	}
	// Slot 0 pushes 1…3, slot 1 pushes 1; the first learner takes them.
	for q := uint64(1); q <= 3; q++ {
		go push(SampleID{0, 1, q})
		pull(first, byte(q))
		time.Sleep(10 * time.Millisecond) // the ack, before the next push
	}
	go push(SampleID{1, 2, 1})
	pull(first, 1)
	time.Sleep(10 * time.Millisecond)
	window := first.(DedupWindow).MarshalDedup()
	// Acknowledged after the checkpoint: slot 0's 4 and 5.
	for q := uint64(4); q <= 5; q++ {
		go push(SampleID{0, 1, q})
		pull(first, byte(q))
		time.Sleep(10 * time.Millisecond)
	}
	first.Close()

	second, err := natsTransport(t, srv.URL()).Samples(ctx, run, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	if err := second.(DedupWindow).RestoreDedup(window); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		push(SampleID{0, 1, 3}) // a retry of a sample the window holds: acked, not queued
		push(SampleID{1, 2, 1})
		push(SampleID{0, 1, 6})
		push(SampleID{0, 1, 7})
	}()
	pull(second, 6)
	pull(second, 7)
	<-done
	if st := second.Stats(); st.Duplicates != 2 || st.Lost != 2 {
		t.Errorf("restored learner: %d duplicates, %d lost; want 2 (the retries) and 2 (slot 0's 4 and 5)", st.Duplicates, st.Lost)
	}
	if err := second.(DedupWindow).RestoreDedup(window); err == nil {
		t.Error("a dedup window restored after the first Pull")
	}
	if err := new(seenSamples).restore([]byte("junk")); err == nil {
		t.Error("junk restored as a dedup window")
	}
}

// TestAboveHeld: a restarted publisher's floor is above every version a
// reader may hold, pushed but not stored included, and 0 on a run that
// published nothing.
func TestAboveHeld(t *testing.T) {
	srv := startServer(t)
	ctx := ctxT(t, 30*time.Second)
	run := runID(t)
	like := testParams(4)
	tr := natsTransport(t, srv.URL())
	fresh, err := tr.Params(ctx, run, Options{Like: like})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := fresh.(HeldBound).AboveHeld(ctx); err != nil || n != 0 {
		t.Fatalf("a run without versions: %d %v, want 0", n, err)
	}
	reader, err := natsTransport(t, srv.URL()).Params(ctx, run, Options{Like: like})
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	const last = 2*storeEvery + 3
	for n := uint64(1); n <= last; n++ {
		if err := fresh.Publish(ctx, version(n, like)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := reader.Wait(ctx, last); err != nil {
		t.Fatal(err)
	}
	// Killed: no pending put is flushed.
	p := fresh.(*natsParams)
	p.storeMu.Lock()
	p.pending = nil
	p.storeMu.Unlock()
	fresh.Close()
	restarted, err := natsTransport(t, srv.URL()).Params(ctx, run, Options{Like: like})
	if err != nil {
		t.Fatal(err)
	}
	defer restarted.Close()
	floor, err := restarted.(HeldBound).AboveHeld(context.WithoutCancel(ctx))
	if err != nil {
		t.Fatal(err)
	}
	if floor <= last {
		t.Fatalf("floor %d, not above version %d a reader holds", floor, last)
	}
	if err := restarted.Publish(ctx, version(floor, like)); err != nil {
		t.Fatal(err)
	}
	if v, err := reader.Wait(ctx, floor); err != nil || v.N != floor {
		t.Fatalf("the reader did not take the restarted publisher's version %d: %v %v", floor, v, err)
	}
}

// TestClearWeights: after ClearWeights a new publisher on the run starts
// from version 0 and a new reader holds nothing of the earlier run.
func TestClearWeights(t *testing.T) {
	srv := startServer(t)
	ctx := ctxT(t, 30*time.Second)
	run := runID(t)
	like := testParams(4)
	n := natsTransport(t, srv.URL())
	old, err := n.Params(ctx, run, Options{Like: like})
	if err != nil {
		t.Fatal(err)
	}
	for v := uint64(1); v <= 3; v++ {
		if err := old.Publish(ctx, version(v, like)); err != nil {
			t.Fatal(err)
		}
	}
	old.Close() // flushes the pending put: version 3 is stored
	if err := n.ClearWeights(ctx, run); err != nil {
		t.Fatal(err)
	}
	fresh, err := natsTransport(t, srv.URL()).Params(ctx, run, Options{Like: like})
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if floor, err := fresh.(HeldBound).AboveHeld(ctx); err != nil || floor != 0 {
		t.Fatalf("floor after ClearWeights: %d %v, want 0", floor, err)
	}
	// A reader polls the store within paramsPoll: it finds nothing.
	time.Sleep(paramsPoll + 500*time.Millisecond)
	if v := fresh.Latest(); v != nil {
		t.Fatalf("a reader after ClearWeights holds version %d of the earlier run", v.N)
	}
}
