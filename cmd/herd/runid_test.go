package main

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A new run (no --resume) with the run ID of a finished run on the same
// NATS starts from its own weights: the earlier run's weights are not what
// its workers act on, and its learner numbers its versions from the start,
// so it ends on the version a run on a clean server ends on.
func TestLaunchReusedRunIDStartsAfresh(t *testing.T) {
	srv, ctx := natsRun(t, 120*time.Second)
	cfg := writeDistConfig(t, 6)
	launch := func(name string) uint64 {
		t.Helper()
		_, stderr, err := launchCmd(t, ctx, "--config", cfg, "--out", filepath.Join(t.TempDir(), name), "--quiet",
			"--nats", srv.URL(), "--run", "again", "--ttl", "1s")
		if err != nil {
			t.Fatalf("launch %s: %v\n%s", name, err, stderr)
		}
		return newestWeights(t, ctx, srv.URL(), "again")
	}
	first := launch("first")
	if first == 0 {
		t.Fatal("the first run left no weights version in the store: the test checks nothing")
	}
	if second := launch("second"); second != first {
		t.Errorf("second run of run ID again ended on weights version %d, the first on %d: the second took over the first's versions", second, first)
	}
}

// newestWeights returns the newest weights version in run's params store.
func newestWeights(t *testing.T, ctx context.Context, url, run string) uint64 {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	obs, err := js.ObjectStore(ctx, "herd_"+run+"_params")
	if err != nil {
		t.Fatal(err)
	}
	infos, err := obs.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var newest uint64
	for _, info := range infos {
		if s, ok := strings.CutPrefix(info.Name, "v-"); ok && !info.Deleted {
			if n, err := strconv.ParseUint(s, 10, 64); err == nil {
				newest = max(newest, n)
			}
		}
	}
	return newest
}
