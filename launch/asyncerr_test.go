package launch

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"herd/transport"
)

// A NATS outage repeats the same asynchronous error for every subscription
// every few seconds: it is printed once a minute, with the count held back.
func TestAsyncErrorsRateLimited(t *testing.T) {
	var out bytes.Buffer
	a := newAsyncErrors(&out)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a.now = func() time.Time { return now }
	missed := errors.New("consumer not active")
	for i := range 600 { // 10 minutes: 6 subscriptions, one miss each every 6 s
		now = now.Add(time.Second)
		a.handle(nil, &nats.Subscription{Subject: "$KV.x." + string(rune('a'+i%6))}, missed)
	}
	a.handle(nil, nil, errors.New("slow consumer"))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 11 {
		t.Fatalf("%d lines for 600 repeats over 10 minutes and one other error, want 10 + 1:\n%s", len(lines), out.String())
	}
	if !strings.Contains(lines[1], "59 more like it") || !strings.Contains(lines[10], "slow consumer") {
		t.Errorf("lines do not count the repeats or lost the other error:\n%s", out.String())
	}
}

// Every connection launch dials reports its asynchronous errors through
// the rate limit, not nats.go's default handler, which prints each one.
func TestDialRateLimitsAsyncErrors(t *testing.T) {
	srv, err := transport.StartServer(transport.ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	var out bytes.Buffer
	o := NATS{URL: srv.URL(), errs: newAsyncErrors(&out)}
	nc, err := o.dial("test")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if nc.Opts.AsyncErrorCB == nil {
		t.Fatal("the connection has no asynchronous error handler")
	}
	for range 20 {
		nc.Opts.AsyncErrorCB(nc, nil, errors.New("consumer not active"))
	}
	if n := strings.Count(out.String(), "\n"); n != 1 {
		t.Errorf("%d lines through the rate limit for 20 repeats, want 1 (nats.go's default handler prints each one):\n%s", n, out.String())
	}
}
