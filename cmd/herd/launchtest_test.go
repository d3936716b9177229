package main

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"herd/transport"
)

// Helpers of the tests that start herd launch and its workers.

// startNATS starts an embedded NATS server that the test shuts down.
func startNATS(t *testing.T, opts transport.ServerOptions) *transport.Server {
	t.Helper()
	srv, err := transport.StartServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	return srv
}

// natsRun skips the test under -short, starts a NATS server and returns
// it with a context that ends after timeout (a hang guard, not a timing).
func natsRun(t *testing.T, timeout time.Duration) (*transport.Server, context.Context) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts processes")
	}
	srv := startNATS(t, transport.ServerOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	return srv, ctx
}

// launchResult is what a herd launch run in the background printed and
// returned.
type launchResult struct {
	stdout, stderr string
	err            error
}

// launchAsync runs herd launch with args in the background; its result
// arrives on the channel.
func launchAsync(t *testing.T, ctx context.Context, args ...string) <-chan launchResult {
	t.Helper()
	done := make(chan launchResult, 1)
	go func() {
		o, e, err := launchCmd(t, ctx, args...)
		done <- launchResult{o, e, err}
	}()
	return done
}

// awaitPIDs polls the run's registrations until every one of names is
// there and returns their process ids; the test fails if the launch
// behind done ends first.
func awaitPIDs(t *testing.T, ctx context.Context, mem transport.Membership, done <-chan launchResult, names ...string) map[string]int {
	t.Helper()
	pids := map[string]int{}
	for len(pids) < len(names) {
		select {
		case r := <-done:
			t.Fatalf("launch ended before %v registered: %v\n%s", names, r.err, r.stderr)
		case <-time.After(50 * time.Millisecond):
		}
		ms, err := mem.Members(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			for _, name := range names {
				if pid, err := strconv.Atoi(string(m.Info)); m.Name == name && err == nil && pid != 0 {
					pids[name] = pid
				}
			}
		}
	}
	return pids
}

func watchRun(t *testing.T, ctx context.Context, url, run string) transport.Membership {
	t.Helper()
	n, err := dialNATS(t, url)
	if err != nil {
		t.Fatal(err)
	}
	mem, err := n.Membership(ctx, run, transport.Options{TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Close() })
	return mem
}

func putRunConfig(t *testing.T, ctx context.Context, n *transport.NATS, run, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.PutRunConfig(ctx, run, data); err != nil {
		t.Fatal(err)
	}
}

func dialNATS(t *testing.T, url string) (*transport.NATS, error) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		return nil, err
	}
	t.Cleanup(nc.Close)
	return transport.NewNATS(nc)
}
