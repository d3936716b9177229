package transport

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestPushOverMaxPayload: a sample larger than the server's max payload is
// an immediate bad request naming both sizes, which callers do not retry,
// not an error they retry until a timeout.
func TestPushOverMaxPayload(t *testing.T) {
	srv, err := StartServer(ServerOptions{MaxPayload: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n := natsTransport(t, srv.URL())
	learner, err := n.Samples(ctx, "payload", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer learner.Close()
	go learner.Pull(ctx) // joins the learners' queue
	pusher, err := natsTransport(t, srv.URL()).Samples(ctx, "payload", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer pusher.Close()
	if err := pusher.Push(ctx, SampleID{Slot: 1, Seq: 1}, make([]byte, 1<<10)); err != nil {
		t.Fatalf("a small sample: %v", err)
	}
	start := time.Now()
	err = pusher.Push(ctx, SampleID{Slot: 1, Seq: 2}, make([]byte, 128<<10))
	if !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "max payload of 65536 bytes") || !strings.Contains(err.Error(), "1310") {
		t.Fatalf("a sample over the max payload: %v, want ErrBadRequest naming both sizes", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the refusal took %v", d)
	}
}
