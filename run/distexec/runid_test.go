package distexec_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"herd/algo"
	"herd/algo/ppo"
	"herd/run"
	"herd/run/distexec"
	"herd/transport"
)

// A run directory names its run on a shared server: the same directory
// (however it is written) the same ID, another directory another.
func TestDirRunID(t *testing.T) {
	dir := t.TempDir()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(wd, filepath.Join(dir, "a"))
	if err != nil {
		t.Fatal(err)
	}
	a, b := distexec.DirRunID(filepath.Join(dir, "a")), distexec.DirRunID(filepath.Join(dir, "b"))
	if a == b {
		t.Errorf("directories a and b share run ID %s", a)
	}
	if r := distexec.DirRunID(rel); r != a {
		t.Errorf("relative path: run ID %s, absolute %s", r, a)
	}
	if r := distexec.DirRunID(filepath.Join(dir, "a") + "/"); r != a {
		t.Errorf("trailing slash: run ID %s, without %s", r, a)
	}
	if !strings.HasPrefix(a, "herd-") || len(a) > 64 {
		t.Errorf("run ID %q: want herd-… of at most 64 characters (a NATS name)", a)
	}
}

const ppoShared = `algo: ppo
env: CartPole-v1
seed: 1
steps: %d
runtime: {executor: dist, env_workers: 1, transport: nats, nats_url: %q}
ppo: {num_envs: 2, num_steps: 16, num_minibatches: 1, update_epochs: 1, hidden: [8]}
`

// Two herd train runs of one directory on one external NATS server: the
// second is refused with ErrRunActive, naming the first's process, before
// it touches the first's streams, and the first finishes unharmed; a run
// of another directory meanwhile trains on streams of its own.
func TestSharedServerRunRefused(t *testing.T) {
	srv, err := transport.StartServer(transport.ServerOptions{Generate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	url := srv.AuthURL()
	resolve := func(steps int, out string) *algo.Resolved {
		res, err := algo.Resolve([]byte(fmt.Sprintf(ppoShared, steps, url)), []algo.Spec{ppo.Spec()}, algo.Overrides{})
		if err != nil {
			t.Fatal(err)
		}
		res.Header.Out = out
		return res
	}
	dir, other := filepath.Join(t.TempDir(), "run"), filepath.Join(t.TempDir(), "run")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	first := make(chan error, 1)
	firstCtx, stopFirst := context.WithCancel(ctx)
	defer stopFirst()
	go func() {
		_, err := algo.TrainRun(firstCtx, resolve(1<<30, dir), algo.RunOptions{Executors: run.Executors()})
		first <- err
	}()

	// The first run holds its ID once it registers.
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	n, err := transport.NewNATS(nc)
	if err != nil {
		t.Fatal(err)
	}
	mem, err := n.Membership(ctx, distexec.DirRunID(dir), transport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	registered := time.Now().Add(30 * time.Second)
	for {
		if time.Now().After(registered) {
			t.Fatalf("the first run did not register under run ID %s within 30 s", distexec.DirRunID(dir))
		}
		ms, err := mem.Members(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(ms, func(m transport.Member) bool { return m.Name == "train" }) {
			break
		}
		select {
		case err := <-first:
			t.Fatalf("the first run ended before it registered: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
	}

	// The same directory again (its files aside: the run directory's own
	// lock is not what is tested here).
	_, err = algo.TrainRun(ctx, resolve(4096, dir), algo.RunOptions{Executors: run.Executors(), NoFiles: true})
	if !errors.Is(err, distexec.ErrRunActive) || !strings.Contains(err.Error(), fmt.Sprintf("train (process %d)", os.Getpid())) {
		t.Errorf("second run of one directory: %v; want ErrRunActive naming train (process %d)", err, os.Getpid())
	}
	// Another directory trains alongside.
	sum, err := algo.TrainRun(ctx, resolve(2048, other), algo.RunOptions{Executors: run.Executors()})
	if err != nil || sum.Steps != 2048 {
		t.Errorf("a run of another directory: %d steps, %v; want 2048 steps", sum.Steps, err)
	}
	select {
	case err := <-first:
		t.Fatalf("the first run ended while the others ran: %v", err)
	default:
	}
	stopFirst()
	if err := <-first; err != nil && !errors.Is(err, context.Canceled) && !strings.Contains(err.Error(), "interrupted") {
		t.Errorf("first run, stopped: %v", err)
	}
	// Its hold is gone with it: the directory's ID is free again.
	ms, err := mem.Members(ctx)
	if err != nil || len(ms) != 0 {
		t.Errorf("after the first run: members %v, %v; want none", ms, err)
	}
}
